//! The engine's outputs waiting for the shell, in order.

use std::collections::VecDeque;

use log::Level;

use super::io::{Output, Topic};

#[derive(Debug, Default)]
pub struct Outbox {
    queue: VecDeque<Output>,
}

impl Outbox {
    pub fn push(&mut self, o: Output) {
        self.queue.push_back(o);
    }

    pub fn log(&mut self, level: Level, topic: Topic, text: String) {
        self.queue.push_back(Output::Log { level, topic, text });
    }

    pub fn pop(&mut self) -> Option<Output> {
        self.queue.pop_front()
    }
}
