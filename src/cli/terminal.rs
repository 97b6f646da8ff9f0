//! The chat's input: lines read on a thread of their own and handed to the
//! async side through a channel, so the runtime keeps running (and sees a
//! connection close) while the user thinks. An entry may span lines: a line
//! ending in `\` continues on the next, and a line `"""` opens a block that
//! the next `"""` closes (for pasting).

use std::io::{BufRead, Write};

use tokio::sync::mpsc;

/// The line that opens and closes a pasted block.
const BLOCK_FENCE: &str = "\"\"\"";

pub struct Terminal {
    lines: mpsc::UnboundedReceiver<String>,
}

impl Terminal {
    /// Starts reading standard input; the channel closes at end of input.
    pub fn spawn() -> Terminal {
        let (sender, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Terminal { lines }
    }

    /// One entry after `prompt`, its lines joined by `\n`; `None` at end of input.
    pub async fn read_entry(&mut self, prompt: &str) -> Option<String> {
        show_prompt(prompt);
        let mut entry = Entry::default();
        loop {
            let line = self.lines.recv().await?;
            match entry.push(&line) {
                Some(text) => return Some(text),
                None => show_prompt("...> "),
            }
        }
    }
}

fn show_prompt(prompt: &str) {
    print!("{prompt}");
    let _ = std::io::stdout().flush();
}

/// An entry being typed.
#[derive(Debug, Default)]
struct Entry {
    lines: Vec<String>,
    in_block: bool,
}

impl Entry {
    /// Adds a line; the whole entry once it is complete.
    fn push(&mut self, line: &str) -> Option<String> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim() == BLOCK_FENCE {
            if self.in_block {
                self.in_block = false;
                return Some(std::mem::take(&mut self.lines).join("\n"));
            }
            self.in_block = true;
            return None;
        }
        if self.in_block {
            self.lines.push(line.to_string());
            return None;
        }
        match line.strip_suffix('\\') {
            Some(start) => {
                self.lines.push(start.to_string());
                None
            }
            None => {
                self.lines.push(line.to_string());
                Some(std::mem::take(&mut self.lines).join("\n"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(lines: &[&str]) -> Vec<String> {
        let mut entry = Entry::default();
        lines.iter().filter_map(|line| entry.push(line)).collect()
    }

    #[test]
    fn a_trailing_backslash_continues_the_entry() {
        assert_eq!(
            entries(&["first \\", "second\\", "third", "next"]),
            ["first \nsecond\nthird", "next"]
        );
    }

    #[test]
    fn a_fenced_block_keeps_its_lines_as_typed() {
        assert_eq!(
            entries(&["\"\"\"", "{", "  \"a\": 1 \\", "}", "\"\"\"", "after"]),
            ["{\n  \"a\": 1 \\\n}", "after"]
        );
    }
}
