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

/// Up to this many buffered bytes the buffer grows by doubling; past it,
/// straight to the limit.
const DOUBLING_LIMIT: usize = 64 * 1024;

/// An event, or a line, longer than the parser's limit: the response is
/// abandoned rather than buffered without bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTooLarge {
    pub limit: usize,
}

/// Parser state between chunks. Bytes are buffered rather than decoded per
/// chunk, because a chunk boundary may fall inside a multi-byte character.
/// Each byte is scanned once: a push resumes where the last one stopped, and
/// the bytes held (an unfinished line plus the event's data) never exceed
/// `max_event_bytes` plus one chunk.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes after the last complete line.
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no line end.
    scanned: usize,
    /// The `event:` field of the event being assembled.
    event: Option<String>,
    /// The `data:` lines of the event being assembled.
    data: Vec<String>,
    /// Bytes of `data`, with their joining newlines.
    data_bytes: usize,
    max_event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> SseParser {
        SseParser::with_max_event_bytes(super::wire::DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    pub fn with_max_event_bytes(max_event_bytes: usize) -> SseParser {
        SseParser {
            buffer: Vec::new(),
            scanned: 0,
            event: None,
            data: Vec::new(),
            data_bytes: 0,
            max_event_bytes,
        }
    }

    /// Feeds one chunk; returns the events it completed, in order, or
    /// `EventTooLarge` once an unfinished line or event passes the limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, EventTooLarge> {
        let has_line_end = chunk.iter().any(|&byte| byte == b'\n' || byte == b'\r');
        if !has_line_end && self.held_bytes() + chunk.len() > self.max_event_bytes {
            // Refused before copying: a line that only grows is never buffered past the limit.
            return Err(self.too_large());
        }
        let needed = self.buffer.len() + chunk.len();
        if needed > self.buffer.capacity() && needed > DOUBLING_LIMIT {
            // One allocation up to the limit instead of doubling: each
            // doubling leaves the old block behind (as much again as the
            // buffer), which the allocator may keep resident. Only the
            // pages written become resident.
            let target = needed.max(self.max_event_bytes);
            self.buffer.reserve_exact(target - self.buffer.len());
        }
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut line_start = 0;
        let mut index = self.scanned;
        loop {
            let Some(offset) = self.buffer[index..]
                .iter()
                .position(|&byte| byte == b'\n' || byte == b'\r')
            else {
                index = self.buffer.len();
                break;
            };
            let end = index + offset;
            let byte = self.buffer[end];
            // A `\r` as the last buffered byte may be the first half of a
            // `\r\n` split across chunks: wait for the next byte to decide.
            if byte == b'\r' && end + 1 == self.buffer.len() {
                index = end;
                break;
            }
            let terminator_len = if byte == b'\r' && self.buffer[end + 1] == b'\n' {
                2
            } else {
                1
            };
            let line = String::from_utf8_lossy(&self.buffer[line_start..end]).into_owned();
            index = end + terminator_len;
            line_start = index;
            if let Some(event) = self.take_line(&line)? {
                events.push(event);
            }
        }
        // Only the unfinished line moves: at most the tail of this chunk, or
        // nothing when the chunk held no line end.
        self.buffer.drain(..line_start);
        self.scanned = index - line_start;
        if self.held_bytes() > self.max_event_bytes {
            return Err(self.too_large());
        }
        Ok(events)
    }

    /// Called at end of input: dispatches a final event that lacked its
    /// trailing blank line, as some servers end the body without one.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        let mut rest = String::from_utf8_lossy(&rest).into_owned();
        if rest.ends_with('\r') {
            rest.pop();
        }
        if !rest.is_empty() {
            if let Ok(Some(event)) = self.take_line(&rest) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    /// The unfinished line and the event being assembled.
    fn held_bytes(&self) -> usize {
        self.buffer.len() + self.data_bytes
    }

    fn too_large(&self) -> EventTooLarge {
        EventTooLarge {
            limit: self.max_event_bytes,
        }
    }

    /// Applies one line; returns an event when the line is the blank one that ends it.
    fn take_line(&mut self, line: &str) -> Result<Option<SseEvent>, EventTooLarge> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data_bytes += value.len() + 1;
                if self.data_bytes > self.max_event_bytes {
                    return Err(self.too_large());
                }
                self.data.push(value.to_string());
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
        Ok(None)
    }

    /// Per the spec, an event with no data lines is not dispatched.
    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if self.data.is_empty() {
            return None;
        }
        self.data_bytes = 0;
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
            events.extend(parser.push(chunk).expect("within the limit"));
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

    #[test]
    fn a_line_over_the_limit_fails_without_being_buffered() {
        let mut parser = SseParser::with_max_event_bytes(64);
        assert_eq!(parser.push(b"data: ").unwrap(), vec![]);
        let mut failed = false;
        for _ in 0..100 {
            if parser.push(&[b'x'; 16]).is_err() {
                failed = true;
                break;
            }
            assert!(parser.buffer.len() <= 64);
        }
        assert!(failed);
    }

    #[test]
    fn an_event_of_many_lines_over_the_limit_fails() {
        let mut parser = SseParser::with_max_event_bytes(32);
        let result = parser.push(b"data: 0123456789\ndata: 0123456789\ndata: 0123456789\n");
        assert_eq!(result, Err(EventTooLarge { limit: 32 }));
    }

    #[test]
    fn many_events_in_one_chunk_larger_than_the_limit_are_fine() {
        let mut parser = SseParser::with_max_event_bytes(32);
        let chunk = b"data: a\n\n".repeat(100);
        assert_eq!(parser.push(&chunk).unwrap().len(), 100);
    }

    #[test]
    fn a_line_fed_byte_by_byte_is_scanned_once() {
        let mut parser = SseParser::new();
        for byte in b"data: " {
            parser.push(&[*byte]).unwrap();
        }
        for _ in 0..1000 {
            parser.push(b"y").unwrap();
            assert_eq!(parser.scanned, parser.buffer.len());
        }
        let events = parser.push(b"\n\n").unwrap();
        assert_eq!(events[0].data.len(), 1000);
    }
}
