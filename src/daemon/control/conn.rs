//! One connection of the control socket: its request read, answered once whole, and the answer
//! written as far as the socket takes it.

use std::io::{self, Read, Write};
use std::time::Instant;

use mio::net::UnixStream;

use super::Responder;
use crate::protocol::{Request, MAX_REQUEST};

pub(super) struct Conn {
    pub(super) stream: UnixStream,
    pub(super) request: Vec<u8>,
    pub(super) answer: Vec<u8>,
    pub(super) written: usize,
    pub(super) answered: bool,
    /// Asked for a reload, which the daemon carries out after this turn's events; the answer
    /// waits for its result (`reloads`).
    pub(super) reload: bool,
    pub(super) deadline: Instant,
}

/// What a connection needs next.
pub(super) enum Step {
    Wait,
    Done,
}

impl Conn {
    /// Reads the request (once it is complete, answers it) and writes what the socket takes.
    pub(super) fn step(&mut self, status: &mut dyn Responder) -> io::Result<Step> {
        if self.reload {
            return Ok(Step::Wait);
        }
        if !self.answered {
            let mut eof = false;
            let mut buf = [0u8; 512];
            while !self.request.contains(&b'\n') && self.request.len() <= MAX_REQUEST {
                match self.stream.read(&mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => self.request.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let line = match self.request.iter().position(|b| *b == b'\n') {
                Some(i) if i < MAX_REQUEST => Some(&self.request[..i]),
                Some(_) => None,
                None if self.request.len() >= MAX_REQUEST => None,
                None if eof && !self.request.is_empty() => Some(&self.request[..]),
                None if eof => return Ok(Step::Done),
                None => return Ok(Step::Wait),
            };
            self.answered = true;
            self.answer = match line.map(|l| answer(l, status)) {
                Some(Some(a)) => a,
                Some(None) => {
                    self.reload = true;
                    return Ok(Step::Wait);
                }
                None => format!("error: request longer than {MAX_REQUEST} bytes\n").into_bytes(),
            };
        }
        while self.written < self.answer.len() {
            match self.stream.write(&self.answer[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Wait),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Step::Done)
    }
}

/// The answer to one request line; `None` for a reload, answered once it is done.
fn answer(line: &[u8], status: &mut dyn Responder) -> Option<Vec<u8>> {
    Some(match Request::parse(line) {
        Ok(Request::Status { top }) => match serde_json::to_vec(&status.status(top)) {
            Ok(mut v) => {
                v.push(b'\n');
                v
            }
            Err(e) => format!("error: cannot render the status: {e}\n").into_bytes(),
        },
        Ok(Request::Metrics) => status.metrics().into_bytes(),
        Ok(Request::Reload) => return None,
        Err(e) => format!("error: {e}\n").into_bytes(),
    })
}
