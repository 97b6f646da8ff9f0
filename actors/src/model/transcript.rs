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
    /// The items' estimated tokens (`estimate::estimate_items`).
    estimated_tokens: OnceLock<u64>,
}

impl TranscriptChunk {
    pub fn shared(items: Vec<ChatItem>) -> Arc<TranscriptChunk> {
        Arc::new(TranscriptChunk {
            items: items.into_boxed_slice(),
            openai_messages: OnceLock::new(),
            estimated_tokens: OnceLock::new(),
        })
    }

    /// The items' estimated tokens, measured the first time.
    pub fn estimated_tokens(&self) -> u64 {
        *self
            .estimated_tokens
            .get_or_init(|| estimate_items(self.items.iter()))
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
    /// A `Vec`, so that the session's tree, which keeps the last path's
    /// chunks for the next turn, can grow them in place once no transcript
    /// holds them (`MessageTree::remember_path`).
    history: Arc<Vec<Arc<TranscriptChunk>>>,
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
    pub fn history(mut chunks: Vec<Arc<TranscriptChunk>>) -> Transcript {
        chunks.retain(|chunk| !chunk.is_empty());
        Transcript::shared_history(Arc::new(chunks))
    }

    /// A transcript of chunks already shared (none of them empty).
    pub fn shared_history(history: Arc<Vec<Arc<TranscriptChunk>>>) -> Transcript {
        Transcript {
            history,
            own: Vec::new(),
        }
    }

    /// `history` of chunks shared with their owner (the session's tree),
    /// counted straight into the transcript's vector: when none is empty (as
    /// usual) its length is known, so it is allocated once, at its size.
    pub fn history_of<'a, I>(chunks: I) -> Transcript
    where
        I: ExactSizeIterator<Item = &'a Arc<TranscriptChunk>> + Clone,
    {
        let history = match chunks.clone().all(|chunk| !chunk.is_empty()) {
            true => chunks.cloned().collect(),
            false => chunks.filter(|chunk| !chunk.is_empty()).cloned().collect(),
        };
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
    /// each chunk's own measure.
    pub fn estimated_tokens(&self) -> u64 {
        self.chunks().map(|chunk| chunk.estimated_tokens()).sum()
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

/// Equal when the items are, however they are chunked.
impl PartialEq for Transcript {
    fn eq(&self, other: &Transcript) -> bool {
        self.iter().eq(other.iter())
    }
}
