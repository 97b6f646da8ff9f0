//! The items of a model request, as chunks shared between the session's
//! tree and every request built from it, so that neither a turn nor a
//! request copies or re-encodes the history.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use super::estimate::estimate_items;
use super::ChatItem;

/// One stored message's transcript items, built once and shared (`Arc`) by
/// the tree and each request replaying it, with what adapters derive from
/// them, made on first use and kept beside them: the message never changes
/// while the chunk lives (the tree builds a new chunk when a message is
/// replaced).
#[derive(Debug, Default)]
pub struct TranscriptChunk {
    items: Box<[ChatItem]>,
    /// The OpenAI Chat Completions messages for these items, encoded and
    /// comma-separated; `None` when they cannot be encoded alone (a tool
    /// result's media spill into a user message after the run of results).
    openai_messages: OnceLock<Option<Box<str>>>,
    /// The items' estimated tokens (`estimate::estimate_items`): measured
    /// when made, since every chunk of a turn's path is asked for it.
    estimated_tokens: u64,
}

impl TranscriptChunk {
    pub fn shared(items: Vec<ChatItem>) -> Arc<TranscriptChunk> {
        Arc::new(TranscriptChunk {
            estimated_tokens: estimate_items(items.iter()),
            items: items.into_boxed_slice(),
            openai_messages: OnceLock::new(),
        })
    }

    /// The items' estimated tokens.
    pub fn estimated_tokens(&self) -> u64 {
        self.estimated_tokens
    }

    /// The OpenAI encoding of the items, made by `encode` the first time.
    pub(crate) fn openai_messages(
        &self,
        encode: impl FnOnce(&[ChatItem]) -> Option<String>,
    ) -> Option<&str> {
        self.openai_messages
            .get_or_init(|| encode(&self.items).map(String::into_boxed_str))
            .as_deref()
    }
}

impl Deref for TranscriptChunk {
    type Target = [ChatItem];

    fn deref(&self) -> &[ChatItem] {
        &self.items
    }
}

/// The items of one request, as shared chunks: the stored history is the
/// session's cached chunk of each message (`Arc`s, never copied per request
/// or per turn), then the live assistant message's own. Iterate with
/// [`Transcript::iter`] (or `for item in &transcript`), front to back.
#[derive(Clone, Debug, Default)]
pub struct Transcript {
    /// The replayed history's chunks, shared by every clone: each request of
    /// a turn clones the history, and that costs one count, not one a message.
    /// Growable, so that the session's tree, which keeps the last path's
    /// chunks for the next turn, can grow them in place once no transcript
    /// holds them (`MessageTree::remember_path`).
    history: Arc<HistoryChunks>,
    /// The chunks pushed after it (the live message's).
    own: Vec<Arc<TranscriptChunk>>,
}

type Chunks<'a> = std::iter::Chain<
    std::slice::Iter<'a, Arc<TranscriptChunk>>,
    std::slice::Iter<'a, Arc<TranscriptChunk>>,
>;

type ChunkItems<'a> =
    std::iter::FlatMap<Chunks<'a>, &'a [ChatItem], fn(&'a Arc<TranscriptChunk>) -> &'a [ChatItem]>;

impl Transcript {
    /// A transcript of `chunks`, shared from here on; empty ones are skipped.
    pub fn history(chunks: Vec<Arc<TranscriptChunk>>) -> Transcript {
        Transcript::history_of(chunks.iter())
    }

    /// A transcript of chunks already shared.
    pub fn shared_history(history: Arc<HistoryChunks>) -> Transcript {
        Transcript {
            history,
            own: Vec::new(),
        }
    }

    /// `history` of chunks shared with their owner (the session's tree),
    /// allocated once, at its length (empty chunks, rare, are skipped).
    pub fn history_of<'a, I>(chunks: I) -> Transcript
    where
        I: ExactSizeIterator<Item = &'a Arc<TranscriptChunk>>,
    {
        let mut history = HistoryChunks::with_capacity(chunks.len());
        for chunk in chunks {
            history.push(Arc::clone(chunk));
        }
        Transcript::shared_history(Arc::new(history))
    }

    /// Appends a chunk (shared, not copied); empty chunks are skipped.
    pub fn push(&mut self, chunk: Arc<TranscriptChunk>) {
        if !chunk.is_empty() {
            self.own.push(chunk);
        }
    }

    pub fn iter<'a>(&'a self) -> ChunkItems<'a> {
        fn items(chunk: &Arc<TranscriptChunk>) -> &[ChatItem] {
            chunk
        }
        self.chunks()
            .flat_map(items as fn(&'a Arc<TranscriptChunk>) -> &'a [ChatItem])
    }

    /// The chunks, front to back, for adapters that cache per chunk.
    pub fn chunks(&self) -> Chunks<'_> {
        self.history.iter().chain(self.own.iter())
    }

    pub fn len(&self) -> usize {
        self.chunks().map(|chunk| chunk.len()).sum()
    }

    /// The estimated tokens of all items (`estimate::estimate_items`), from
    /// each chunk's own measure (the history's summed as it was built).
    pub fn estimated_tokens(&self) -> u64 {
        let own: u64 = self.own.iter().map(|chunk| chunk.estimated_tokens()).sum();
        self.history.estimated_tokens + own
    }

    pub fn is_empty(&self) -> bool {
        self.history.is_empty() && self.own.is_empty()
    }
}

impl From<Vec<ChatItem>> for Transcript {
    fn from(items: Vec<ChatItem>) -> Transcript {
        let mut transcript = Transcript::default();
        transcript.push(TranscriptChunk::shared(items));
        transcript
    }
}

impl<'a> IntoIterator for &'a Transcript {
    type Item = &'a ChatItem;
    type IntoIter = ChunkItems<'a>;

    fn into_iter(self) -> ChunkItems<'a> {
        self.iter()
    }
}

/// A history's chunks, none empty, with their estimated tokens summed as
/// they are pushed: every turn asks for the total (compaction planning, the
/// turn's budget, the echo model's usage), and summing it there would touch
/// every message of the conversation, each a chunk of its own in memory.
#[derive(Clone, Debug, Default)]
pub struct HistoryChunks {
    chunks: Vec<Arc<TranscriptChunk>>,
    estimated_tokens: u64,
}

impl HistoryChunks {
    pub fn with_capacity(n_chunks: usize) -> HistoryChunks {
        HistoryChunks {
            chunks: Vec::with_capacity(n_chunks),
            estimated_tokens: 0,
        }
    }

    /// Appends `chunk` unless it is empty.
    pub fn push(&mut self, chunk: Arc<TranscriptChunk>) {
        if !chunk.is_empty() {
            self.estimated_tokens += chunk.estimated_tokens();
            self.chunks.push(chunk);
        }
    }
}

impl Deref for HistoryChunks {
    type Target = [Arc<TranscriptChunk>];

    fn deref(&self) -> &[Arc<TranscriptChunk>] {
        &self.chunks
    }
}

/// Equal when the items are, however they are chunked.
impl PartialEq for Transcript {
    fn eq(&self, other: &Transcript) -> bool {
        self.iter().eq(other.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::estimate::estimate_items;

    fn said(text: &str) -> Arc<TranscriptChunk> {
        TranscriptChunk::shared(vec![ChatItem::User(vec![crate::model::ContentPart::Text(
            text.into(),
        )])])
    }

    #[test]
    fn a_history_keeps_the_estimate_of_its_items_and_skips_empty_chunks() {
        let chunks = vec![
            said("first"),
            TranscriptChunk::shared(Vec::new()),
            said("a second, longer one"),
        ];
        let mut transcript = Transcript::history(chunks);
        assert_eq!(transcript.chunks().count(), 2);
        transcript.push(said("the live message"));
        assert_eq!(
            transcript.estimated_tokens(),
            estimate_items(transcript.iter())
        );
    }
}
