//! The engine's outputs waiting for the shell, in order.

use std::collections::VecDeque;

use log::Level;

use super::io::{Output, Topic};
use crate::logging::Fields;

#[derive(Debug, Default)]
pub struct Outbox {
    queue: VecDeque<Output>,
}

impl Outbox {
    pub fn push(&mut self, o: Output) {
        self.queue.push_back(o);
    }

    pub fn log(&mut self, level: Level, topic: Topic, text: String) {
        self.log_with(level, topic, text, Fields::default());
    }

    /// A log record with its fields.
    pub fn log_with(&mut self, level: Level, topic: Topic, text: String, fields: Fields) {
        self.queue.push_back(Output::Log {
            level,
            topic,
            text,
            fields,
        });
    }

    pub fn pop(&mut self) -> Option<Output> {
        self.queue.pop_front()
    }
}
