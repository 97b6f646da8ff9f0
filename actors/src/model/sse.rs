//! Incremental Server-Sent-Events parser: bytes in (in whatever chunks the
//! network delivers), whole events out. Used by the OpenAI and Anthropic
//! adapters to read streamed responses; it knows nothing of either payload.
//!
//! Follows the WHATWG event-stream rules that matter for model providers:
//! `\n`, `\r\n` and `\r` line ends, multi-line `data`, `:` comments, and a
//! blank line dispatching the event. `id` and `retry` are read and ignored.

/// One dispatched event: its `event:` name, if any, and its `data:` lines
/// joined with `\n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// OpenAI-style end marker (`data: [DONE]`).
    pub fn is_done(&self) -> bool {
        self.data.trim() == "[DONE]"
    }
}

/// Parser state between chunks. Bytes are buffered rather than decoded per
/// chunk, because a chunk boundary may fall inside a multi-byte character.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes after the last complete line.
    buffer: Vec<u8>,
    /// The `event:` field of the event being assembled.
    event: Option<String>,
    /// The `data:` lines of the event being assembled.
    data: Vec<String>,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds one chunk; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut line_start = 0;
        let mut index = 0;
        while index < self.buffer.len() {
            let byte = self.buffer[index];
            if byte != b'\n' && byte != b'\r' {
                index += 1;
                continue;
            }
            // A `\r` as the last buffered byte may be the first half of a
            // `\r\n` split across chunks: wait for the next byte to decide.
            if byte == b'\r' && index + 1 == self.buffer.len() {
                break;
            }
            let line = String::from_utf8_lossy(&self.buffer[line_start..index]).into_owned();
            let terminator_len = if byte == b'\r' && self.buffer[index + 1] == b'\n' {
                2
            } else {
                1
            };
            index += terminator_len;
            line_start = index;
            if let Some(event) = self.take_line(&line) {
                events.push(event);
            }
        }
        self.buffer.drain(..line_start);
        events
    }

    /// Called at end of input: dispatches a final event that lacked its
    /// trailing blank line, as some servers end the body without one.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.buffer);
        let mut rest = String::from_utf8_lossy(&rest).into_owned();
        if rest.ends_with('\r') {
            rest.pop();
        }
        if !rest.is_empty() {
            if let Some(event) = self.take_line(&rest) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    /// Applies one line; returns an event when the line is the blank one that ends it.
    fn take_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => self.data.push(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
        None
    }

    /// Per the spec, an event with no data lines is not dispatched.
    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if self.data.is_empty() {
            return None;
        }
        let data = std::mem::take(&mut self.data).join("\n");
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: name.map(str::to_string),
            data: data.to_string(),
        }
    }

    fn parse_in_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(parser.push(chunk));
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn whole_events_in_one_chunk_are_dispatched_in_order() {
        let events = parse_in_chunks(&[b"data: one\n\nevent: ping\ndata: two\n\n"]);
        assert_eq!(events, vec![event(None, "one"), event(Some("ping"), "two")]);
    }

    #[test]
    fn event_split_across_chunks_is_reassembled() {
        let events = parse_in_chunks(&[b"da", b"ta: {\"a\"", b":1}\n", b"\n"]);
        assert_eq!(events, vec![event(None, "{\"a\":1}")]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let input = b"event: a\r\ndata: x\r\n\r\n: comment\r\ndata: y\r\n\r\n";
        let expected = vec![event(Some("a"), "x"), event(None, "y")];
        for split in 0..input.len() {
            let (left, right) = input.split_at(split);
            assert_eq!(
                parse_in_chunks(&[left, right]),
                expected,
                "split at {split}"
            );
        }
    }

    #[test]
    fn crlf_and_lone_cr_end_lines() {
        assert_eq!(
            parse_in_chunks(&[b"data: a\r\n\r\n"]),
            vec![event(None, "a")]
        );
        assert_eq!(
            parse_in_chunks(&[b"data: a\r\rdata: b\r\r"]),
            vec![event(None, "a"), event(None, "b")]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(
            parse_in_chunks(&[b"data: a\ndata:b\ndata\n\n"]),
            vec![event(None, "a\nb\n")]
        );
    }

    #[test]
    fn comments_and_empty_events_dispatch_nothing() {
        assert_eq!(
            parse_in_chunks(&[b": keep-alive\n\nevent: x\n\nid: 3\nretry: 10\n\n"]),
            vec![]
        );
    }

    #[test]
    fn multi_byte_character_split_across_chunks_survives() {
        let input = "data: héllo\n\n".as_bytes();
        let (left, right) = input.split_at(8);
        assert_eq!(parse_in_chunks(&[left, right]), vec![event(None, "héllo")]);
    }

    #[test]
    fn final_event_without_blank_line_is_dispatched_at_finish() {
        assert_eq!(
            parse_in_chunks(&[b"data: [DONE]"]),
            vec![event(None, "[DONE]")]
        );
        assert!(parse_in_chunks(&[b"data: [DONE]\n\n"])[0].is_done());
    }
}
