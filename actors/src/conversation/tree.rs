//! The message tree of one session: messages linked by `parent_id`, and the
//! root-to-leaf path the model sees. Messages are kept in insertion order in a
//! `Vec`: sessions hold tens to hundreds of messages, where a scan beats a map
//! in both speed and memory.

use super::message::Message;
use crate::ids::MessageId;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessageTree {
    messages: Vec<Message>,
}

impl MessageTree {
    pub fn from_messages(messages: Vec<Message>) -> MessageTree {
        MessageTree { messages }
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn contains(&self, id: &MessageId) -> bool {
        self.messages.iter().any(|message| &message.id == id)
    }

    pub fn get(&self, id: &MessageId) -> Option<&Message> {
        self.messages.iter().find(|message| &message.id == id)
    }

    pub fn get_mut(&mut self, id: &MessageId) -> Option<&mut Message> {
        self.messages.iter_mut().find(|message| &message.id == id)
    }

    pub fn all(&self) -> &[Message] {
        &self.messages
    }

    /// Inserts or replaces the message with the same id.
    pub fn upsert(&mut self, message: Message) {
        match self.get_mut(&message.id) {
            Some(existing) => *existing = message,
            None => self.messages.push(message),
        }
    }

    /// Root-to-`leaf` path; empty when `leaf` is `None` or unknown. A broken
    /// parent link ends the walk rather than looping.
    pub fn path_to(&self, leaf: Option<&MessageId>) -> Vec<&Message> {
        let mut path = Vec::new();
        let mut cursor = leaf.and_then(|id| self.get(id));
        while let Some(message) = cursor {
            if path.len() > self.messages.len() {
                break;
            }
            path.push(message);
            cursor = message.parent_id.as_ref().and_then(|id| self.get(id));
        }
        path.reverse();
        path
    }
}
