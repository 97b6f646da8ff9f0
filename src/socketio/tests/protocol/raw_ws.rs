//! A minimal blocking websocket client (RFC 6455 framing over `std::net`),
//! enough to send raw Engine.IO text frames the stock clients never would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Bound on every blocking read, so a broken server fails the test, not hangs it.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Any fixed key works: the server's accept hash is not checked here.
const HANDSHAKE_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const MASK: [u8; 4] = [0x12, 0x34, 0x56, 0x78];

/// What one read from the server gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    Text(String),
    /// A close frame, EOF or a reset: the server ended the connection.
    Closed,
}

pub struct RawWs {
    reader: BufReader<TcpStream>,
}

impl RawWs {
    /// Opens `/socket.io/?{query}` as a websocket; panics unless it gets 101.
    pub fn connect(addr: SocketAddr, query: &str) -> RawWs {
        let mut stream = TcpStream::connect(addr).expect("tcp connect");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("timeout");
        write!(
            stream,
            "GET /socket.io/?{query} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: {HANDSHAKE_KEY}\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        )
        .expect("handshake write");
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).expect("status line");
        assert!(status.contains(" 101 "), "not upgraded: {status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header line");
            if line == "\r\n" {
                break;
            }
        }
        RawWs { reader }
    }

    /// Sends one masked text frame.
    pub fn send_text(&mut self, text: &str) {
        let payload = text.as_bytes();
        let mut frame = vec![0x81u8];
        match payload.len() {
            len @ 0..=125 => frame.push(0x80 | len as u8),
            len @ 126..=0xffff => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&MASK);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
        // The server may already have closed; the next `recv` reports that.
        let _ = self.reader.get_mut().write_all(&frame);
    }

    /// Reads the next text frame (skipping control frames other than close).
    pub fn recv(&mut self) -> Received {
        loop {
            let mut header = [0u8; 2];
            match self.reader.read_exact(&mut header) {
                Ok(()) => {}
                // A silent server is not a closed one: say so rather than pass.
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    panic!("no frame and no close from the server within {READ_TIMEOUT:?}")
                }
                Err(_) => return Received::Closed,
            }
            let opcode = header[0] & 0x0f;
            let len = match header[1] & 0x7f {
                126 => {
                    let mut ext = [0u8; 2];
                    if self.reader.read_exact(&mut ext).is_err() {
                        return Received::Closed;
                    }
                    u64::from(u16::from_be_bytes(ext))
                }
                127 => {
                    let mut ext = [0u8; 8];
                    if self.reader.read_exact(&mut ext).is_err() {
                        return Received::Closed;
                    }
                    u64::from_be_bytes(ext)
                }
                len => u64::from(len),
            };
            let mut payload = vec![0u8; len as usize];
            if self.reader.read_exact(&mut payload).is_err() {
                return Received::Closed;
            }
            match opcode {
                0x1 => return Received::Text(String::from_utf8(payload).expect("utf-8 text")),
                0x8 => return Received::Closed,
                _ => continue,
            }
        }
    }

    /// Reads until a text frame satisfying `wanted` arrives (answering pings
    /// along the way when `pong` is set); `None` if the server closed first.
    pub fn recv_until(&mut self, pong: bool, wanted: impl Fn(&str) -> bool) -> Option<String> {
        loop {
            match self.recv() {
                Received::Text(text) if wanted(&text) => return Some(text),
                Received::Text(text) if pong && text == "2" => self.send_text("3"),
                Received::Text(_) => {}
                Received::Closed => return None,
            }
        }
    }
}
