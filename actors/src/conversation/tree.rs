//! The message tree of one session: messages linked by `parent_id`, and the
//! root-to-leaf path the model sees. Messages are kept in insertion order in a
//! `Vec`, with a map from id to position: a turn looks ids up several times
//! (is the new id free, where is its parent, where does each write go), and
//! a scan of a long conversation for each of them made a turn's cost grow
//! with its length. Only resident sessions hold a tree; the stored form has
//! no index. Each message is behind an `Arc`: a `Message` is 312 bytes, most
//! of them empty options, and in a vector grown by doubling every growth
//! moved them all, and its spare room was that size too; shared, the memory store keeps the very message the tree
//! holds instead of encoding a copy at every write.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::message::{Message, Role};
use super::transcript::build_transcript;
use crate::ids::MessageId;
use crate::model::{HistoryChunks, Transcript, TranscriptChunk};

/// Messages a new session's tree has room for before it first grows.
const FIRST_CAPACITY: usize = 16;

/// How many of the newest messages `position` compares before hashing.
const NEWEST: usize = 2;

/// Paths at least this long are remembered for the next turn
/// (`remember_path`): a shorter one is walked in less than it would cost an
/// idle session to keep it.
const REMEMBERED_FROM: usize = 8;

#[derive(Clone, Debug, Default)]
pub struct MessageTree {
    /// Shared with the store that holds them (see the module's doc);
    /// replaced, never changed in place.
    messages: Vec<Arc<Message>>,
    /// Each message's transcript items, beside it: built the first time a
    /// request reads the message, then shared by every later request of the
    /// session (a turn's work does not grow with its history). Cleared when
    /// the message is replaced. A `OnceLock`, so readers holding the tree
    /// shared (the history view beside the path) can fill it.
    items: Vec<OnceLock<Arc<TranscriptChunk>>>,
    /// Where each message's parent is, once found: positions never change
    /// (messages are only appended or replaced in place), so a path is walked
    /// without comparing ids.
    parents: Vec<Option<usize>>,
    /// Where each message is, by id (ids are unique within a session).
    positions: HashMap<MessageId, usize>,
    /// Where the summaries are, in stored order: every turn looks for the
    /// newest one on its path, and most sessions have none.
    summaries: Vec<usize>,
    /// The path the last turn read, which the next turn of the conversation
    /// extends (its new message hangs from this leaf) instead of walking the
    /// whole conversation again. Forgotten whenever a summary is stored or
    /// replaced, or a message on the path replaced: those are the only
    /// changes that can alter a walked path (or its view), so what is kept
    /// is always what a walk would give.
    remembered: Option<Box<RememberedPath>>,
}

/// A walked path (see `MessageTree::remembered`).
#[derive(Clone, Debug)]
struct RememberedPath {
    /// The leaf's position.
    leaf: usize,
    /// The path's positions, root first. Its root has no parent: a walk cut
    /// short at a parent not stored yet would go further once it is.
    positions: Vec<usize>,
    /// The path's non-empty transcript items, shared with the transcripts
    /// made from them (`Transcript::shared_history`); grown in place once
    /// the turn that read them has ended and dropped them.
    chunks: Arc<HistoryChunks>,
}

/// Trees are equal when their messages are; the item cache is derived.
impl PartialEq for MessageTree {
    fn eq(&self, other: &MessageTree) -> bool {
        self.messages == other.messages
    }
}

impl MessageTree {
    pub fn from_messages<M: Into<Arc<Message>>>(messages: Vec<M>) -> MessageTree {
        let n_messages = messages.len();
        // A reloaded conversation usually goes on: give it the room a new
        // one gets, rather than growing from its exact length (each growth
        // moves every message and hashes every id again). Each part is
        // allocated at that size at once: collected in place, the vector
        // would keep the loaded one's buffer, and the index would be hashed
        // twice.
        let capacity = n_messages + FIRST_CAPACITY;
        let mut boxed = Vec::with_capacity(capacity);
        boxed.extend(messages.into_iter().map(Into::into));
        let mut positions = HashMap::with_capacity(capacity);
        // A stored id twice (never written so) resolves to its last copy.
        positions.extend(
            boxed
                .iter()
                .enumerate()
                .map(|(index, message)| (message.id.clone(), index)),
        );
        let mut items = Vec::with_capacity(capacity);
        items.resize(n_messages, OnceLock::new());
        let summaries = boxed
            .iter()
            .enumerate()
            .filter(|(_, message)| message.role == Role::Summary)
            .map(|(index, _)| index)
            .collect();
        let mut tree = MessageTree {
            messages: boxed,
            items,
            parents: Vec::with_capacity(capacity),
            positions,
            summaries,
            remembered: None,
        };
        for index in 0..n_messages {
            let parent = tree.locate_parent(index);
            tree.parents.push(parent);
        }
        tree
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn contains(&self, id: &MessageId) -> bool {
        self.positions.contains_key(id)
    }

    pub fn get(&self, id: &MessageId) -> Option<&Message> {
        self.position(id).map(|index| &*self.messages[index])
    }

    /// Every message, in the order they were stored.
    pub fn all(&self) -> impl DoubleEndedIterator<Item = &Message> + ExactSizeIterator {
        self.messages.iter().map(|message| &**message)
    }

    /// The summaries, in the order they were stored.
    pub fn summaries(&self) -> impl DoubleEndedIterator<Item = &Message> {
        self.summaries.iter().map(|&index| &*self.messages[index])
    }

    pub fn has_summaries(&self) -> bool {
        !self.summaries.is_empty()
    }

    /// Inserts or replaces the message with the same id.
    pub fn upsert(&mut self, message: impl Into<Arc<Message>>) {
        let message = message.into();
        if self.messages.capacity() == 0 {
            self.reserve_first();
        }
        // One hash of the id for the look-up and the insert.
        let next = self.messages.len();
        match self.positions.entry(message.id.clone()) {
            Entry::Occupied(found) => {
                let index = *found.get();
                self.replace(index, message);
            }
            Entry::Vacant(free) => {
                free.insert(next);
                if message.role == Role::Summary {
                    self.summaries.push(next);
                    self.remembered = None;
                }
                self.messages.push(message);
                self.items.push(OnceLock::new());
                self.parents.push(None);
                self.parents[next] = self.locate_parent(next);
            }
        }
    }

    fn replace(&mut self, index: usize, message: Arc<Message>) {
        let was_summary = self.messages[index].role == Role::Summary;
        // Off the remembered path a message is no step of it (only its own
        // parent link changes), as when a turn's reply is stored again.
        let on_path = (self.remembered.as_ref())
            .is_some_and(|remembered| remembered.positions.contains(&index));
        if on_path || was_summary || message.role == Role::Summary {
            self.remembered = None;
        }
        if was_summary != (message.role == Role::Summary) {
            if was_summary {
                self.summaries.retain(|&at| at != index);
            } else {
                let at = self.summaries.partition_point(|&at| at < index);
                self.summaries.insert(at, index);
            }
        }
        self.messages[index] = message;
        self.items[index] = OnceLock::new();
        self.parents[index] = self.locate_parent(index);
    }

    /// Room for a short conversation at its first message (`from_messages`
    /// gives a loaded one as much beyond its length): a tree growing one
    /// doubling at a time reallocates its index three times in its first
    /// ten turns.
    #[cold]
    fn reserve_first(&mut self) {
        self.messages.reserve(FIRST_CAPACITY);
        self.items.reserve(FIRST_CAPACITY);
        self.parents.reserve(FIRST_CAPACITY);
        self.positions.reserve(FIRST_CAPACITY);
    }

    /// The position of the parent of the message at `index`, if stored.
    fn locate_parent(&self, index: usize) -> Option<usize> {
        self.messages[index]
            .parent_id
            .as_ref()
            .and_then(|id| self.position(id))
    }

    /// The transcript of the root-to-`leaf` path (see [`Self::path_to`]),
    /// as the shared items of each message: no message's items are copied
    /// or built twice.
    pub fn transcript_to(&self, leaf: Option<&MessageId>) -> Transcript {
        let steps = self.path_items(leaf);
        Transcript::history_of(steps.iter().map(|(_, items)| *items))
    }

    /// [`Self::path_to`]'s messages, each beside its shared transcript items
    /// (built on first use), for readers that place something between them
    /// (`history::view` puts a summary before the first user message).
    pub fn path_items(&self, leaf: Option<&MessageId>) -> Vec<(&Message, &Arc<TranscriptChunk>)> {
        self.path_map(leaf, |index| (&*self.messages[index], self.items_at(index)))
    }

    /// The shared transcript items of the message `id`, if stored.
    pub fn items_of(&self, id: &MessageId) -> Option<&Arc<TranscriptChunk>> {
        self.position(id).map(|index| self.items_at(index))
    }

    /// The items of the message at `index`, built on first use.
    fn items_at(&self, index: usize) -> &Arc<TranscriptChunk> {
        self.items[index].get_or_init(|| {
            TranscriptChunk::shared(build_transcript(
                &[&*self.messages[index]],
                &Default::default(),
            ))
        })
    }

    /// Root-to-`leaf` path; empty when `leaf` is `None` or unknown. A broken
    /// parent link ends the walk rather than looping.
    ///
    /// A parent is nearly always stored just before its child (a turn
    /// appends the user message, then the reply), so each parent is looked
    /// for backwards from its child's position first: the walk is linear in
    /// the session's length, not quadratic.
    pub fn path_to(&self, leaf: Option<&MessageId>) -> Vec<&Message> {
        self.path_map(leaf, |index| &*self.messages[index])
    }

    /// What `at` makes of each of [`Self::path_to`]'s positions, root first,
    /// walked into the one vector (every turn walks its whole path).
    fn path_map<T>(&self, leaf: Option<&MessageId>, at: impl Fn(usize) -> T) -> Vec<T> {
        // The whole tree bounds the path: one allocation instead of a
        // doubling every few messages.
        let mut path = Vec::with_capacity(self.messages.len());
        let mut cursor = leaf.and_then(|id| self.position(id));
        while let Some(index) = cursor {
            if path.len() > self.messages.len() {
                break;
            }
            path.push(at(index));
            // A parent stored after its child was not found on insertion.
            cursor = self.parents[index].or_else(|| self.locate_parent(index));
        }
        path.reverse();
        path
    }

    /// Remembers the root-to-`leaf` path for [`Self::remembered_path`],
    /// extending the one remembered when `leaf` descends from its leaf (the
    /// next turn of a conversation), walking the tree otherwise. A path
    /// through a summary, one whose walk ends at a parent not stored, one
    /// that loops and a short one are not remembered.
    pub fn remember_path(&mut self, leaf: Option<&MessageId>) {
        let mut base = self.remembered.take();
        // A tree this small holds no path long enough to keep.
        if self.messages.len() < REMEMBERED_FROM || self.has_summaries() {
            return;
        }
        let Some(leaf_at) = leaf.and_then(|id| self.position(id)) else {
            return;
        };
        // The new part, leaf first.
        let mut fresh = Vec::new();
        let mut cursor = Some(leaf_at);
        let joined = loop {
            let Some(index) = cursor else {
                break None;
            };
            if base.as_ref().is_some_and(|base| base.leaf == index) {
                break base.take();
            }
            if fresh.len() > self.messages.len() {
                return;
            }
            fresh.push(index);
            cursor = self.parents[index].or_else(|| self.locate_parent(index));
        };
        let mut remembered = match joined {
            Some(base) => base,
            None => {
                let rooted =
                    (fresh.last()).is_some_and(|&root| self.messages[root].parent_id.is_none());
                if !rooted || fresh.len() < REMEMBERED_FROM {
                    return;
                }
                Box::new(RememberedPath {
                    leaf: leaf_at,
                    positions: Vec::with_capacity(fresh.len()),
                    chunks: Arc::new(HistoryChunks::with_capacity(fresh.len())),
                })
            }
        };
        let chunks = Arc::make_mut(&mut remembered.chunks);
        for &index in fresh.iter().rev() {
            remembered.positions.push(index);
            chunks.push(Arc::clone(self.items_at(index)));
        }
        remembered.leaf = leaf_at;
        self.remembered = Some(remembered);
    }

    /// The root-to-`leaf` path and its transcript items (as
    /// [`Transcript::history_of`] the path's would be), when it is the
    /// remembered one (see [`Self::remember_path`]).
    pub fn remembered_path(&self, leaf: Option<&MessageId>) -> Option<(Vec<&Message>, Transcript)> {
        let remembered = self.remembered.as_deref()?;
        if leaf.and_then(|id| self.position(id)) != Some(remembered.leaf) || self.has_summaries() {
            return None;
        }
        let path = (remembered.positions.iter())
            .map(|&index| &*self.messages[index])
            .collect();
        let history = Transcript::shared_history(Arc::clone(&remembered.chunks));
        Some((path, history))
    }

    /// Where `id` is. The newest two messages are compared first: nearly
    /// every look-up of a turn is for one of them (the leaf, the parent of
    /// a new message, the reply just stored), and comparing an id costs a
    /// fraction of hashing it with the map's keyed hasher.
    fn position(&self, id: &MessageId) -> Option<usize> {
        let n_messages = self.messages.len();
        (n_messages.saturating_sub(NEWEST)..n_messages)
            .rev()
            .find(|&index| self.messages[index].id == *id)
            .or_else(|| self.positions.get(id).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, parent: Option<&str>) -> Message {
        Message::empty(
            MessageId::new(id),
            parent.map(MessageId::new),
            Role::User,
            0,
        )
    }

    fn summary(id: &str, parent: &str) -> Message {
        Message::empty(
            MessageId::new(id),
            Some(MessageId::new(parent)),
            Role::Summary,
            0,
        )
    }

    fn summary_ids(tree: &MessageTree) -> Vec<&str> {
        tree.summaries()
            .map(|message| message.id.as_str())
            .collect()
    }

    #[test]
    fn the_summaries_are_tracked_through_inserts_replacements_and_loads() {
        let mut tree = MessageTree::default();
        tree.upsert(message("a", None));
        assert!(summary_ids(&tree).is_empty());
        tree.upsert(summary("s1", "a"));
        tree.upsert(message("b", Some("a")));
        tree.upsert(summary("s2", "b"));
        assert_eq!(summary_ids(&tree), ["s1", "s2"]);
        // Replaced by a message of another role, then back.
        tree.upsert(message("s1", Some("a")));
        assert_eq!(summary_ids(&tree), ["s2"]);
        tree.upsert(summary("s1", "a"));
        assert_eq!(summary_ids(&tree), ["s1", "s2"]);
        tree.upsert(summary("s2", "b"));
        assert_eq!(summary_ids(&tree), ["s1", "s2"]);
        let loaded = MessageTree::from_messages(tree.all().cloned().collect());
        assert_eq!(summary_ids(&loaded), ["s1", "s2"]);
    }

    fn ids(path: &[&Message]) -> Vec<String> {
        path.iter().map(|message| message.id.to_string()).collect()
    }

    #[test]
    fn path_follows_parents_across_branches_and_any_storage_order() {
        // `b2` branches from `a`; `c` is stored before its parent `b1`.
        let tree = MessageTree::from_messages(vec![
            message("a", None),
            message("c", Some("b1")),
            message("b2", Some("a")),
            message("b1", Some("a")),
        ]);
        let leaf = MessageId::new("c");
        assert_eq!(ids(&tree.path_to(Some(&leaf))), ["a", "b1", "c"]);
        let leaf = MessageId::new("b2");
        assert_eq!(ids(&tree.path_to(Some(&leaf))), ["a", "b2"]);
        assert!(tree.path_to(Some(&MessageId::new("nope"))).is_empty());
        assert!(tree.path_to(None).is_empty());
        // Appended, and a parent that arrives after its child.
        let mut tree = tree;
        tree.upsert(message("d", Some("c")));
        tree.upsert(message("f", Some("e")));
        tree.upsert(message("e", Some("d")));
        let leaf = MessageId::new("f");
        assert_eq!(
            ids(&tree.path_to(Some(&leaf))),
            ["a", "b1", "c", "d", "e", "f"]
        );
    }

    #[test]
    fn the_shared_transcript_equals_a_fresh_one_and_follows_replacements() {
        let mut tree =
            MessageTree::from_messages(vec![message("a", None), message("b", Some("a"))]);
        let leaf = MessageId::new("b");
        let fresh = |tree: &MessageTree| {
            let items = build_transcript(&tree.path_to(Some(&leaf)), &Default::default());
            Transcript::from(items)
        };
        let first = tree.transcript_to(Some(&leaf));
        assert_eq!(first, fresh(&tree));
        assert_eq!(first.len(), 2);
        let mut changed = message("b", Some("a"));
        changed.content = "edited".into();
        tree.upsert(changed);
        let second = tree.transcript_to(Some(&leaf));
        assert_eq!(second, fresh(&tree));
        assert_ne!(second, first, "a replaced message is built again");
    }

    /// The newest messages are found without the index, the others through
    /// it, and a loaded tree holding an id twice (never written so)
    /// resolves it to its last copy either way.
    #[test]
    fn every_message_is_found_where_it_is() {
        let mut tree = MessageTree::default();
        let ids = ["a", "b", "c", "d", "e"];
        for (index, id) in ids.iter().enumerate() {
            tree.upsert(message(id, index.checked_sub(1).map(|parent| ids[parent])));
        }
        for (index, id) in ids.iter().enumerate() {
            assert_eq!(tree.position(&MessageId::new(id)), Some(index));
        }
        assert_eq!(tree.position(&MessageId::new("z")), None);
        let mut changed = message("c", Some("b"));
        changed.content = "changed".into();
        tree.upsert(changed);
        assert_eq!(tree.len(), 5);
        assert_eq!(
            tree.get(&MessageId::new("c")).map(|m| m.content.as_str()),
            Some("changed")
        );

        let twice = |ids: &[&str]| {
            MessageTree::from_messages(ids.iter().map(|id| message(id, None)).collect())
        };
        assert_eq!(
            twice(&["x", "a", "b", "a"]).position(&MessageId::new("a")),
            Some(3)
        );
        assert_eq!(
            twice(&["a", "b", "a", "c"]).position(&MessageId::new("a")),
            Some(2)
        );
        assert_eq!(
            twice(&["a", "a", "b", "c"]).position(&MessageId::new("a")),
            Some(1)
        );
    }

    #[test]
    fn a_parent_cycle_ends_the_walk() {
        let tree =
            MessageTree::from_messages(vec![message("x", Some("y")), message("y", Some("x"))]);
        let path = tree.path_to(Some(&MessageId::new("x")));
        assert!(path.len() <= 3, "{:?}", ids(&path));
    }

    fn said(id: &str, parent: Option<&str>) -> Message {
        let mut said = message(id, parent);
        said.content = format!("said {id}");
        said
    }

    /// Remembers the path to `leaf`; when the tree then has it remembered,
    /// checks it is the walked one (the same messages, the very same shared
    /// items). False when it is not remembered.
    fn remembered_is_walked(tree: &mut MessageTree, leaf: &str) -> bool {
        let leaf = MessageId::new(leaf);
        tree.remember_path(Some(&leaf));
        let Some((path, history)) = tree.remembered_path(Some(&leaf)) else {
            return false;
        };
        assert_eq!(ids(&path), ids(&tree.path_to(Some(&leaf))));
        let walked = tree.transcript_to(Some(&leaf));
        assert_eq!(history, walked);
        // The kept total, grown a turn at a time, is the walked one's.
        assert_eq!(history.estimated_tokens(), walked.estimated_tokens());
        assert_eq!(history.chunks().count(), walked.chunks().count());
        assert!(history
            .chunks()
            .zip(walked.chunks())
            .all(|(kept, built)| Arc::ptr_eq(kept, built)));
        true
    }

    fn chain(tree: &mut MessageTree, prefix: &str, from: Option<&str>, n: usize) {
        let mut parent = from.map(str::to_string);
        for index in 0..n {
            let id = format!("{prefix}{index}");
            tree.upsert(said(&id, parent.as_deref()));
            parent = Some(id);
        }
    }

    #[test]
    fn a_remembered_path_is_the_walked_one_or_none() {
        let mut tree = MessageTree::default();
        chain(&mut tree, "m", None, 10);
        assert!(
            !remembered_is_walked(&mut tree, "m2"),
            "short paths are walked"
        );
        assert!(remembered_is_walked(&mut tree, "m9"));
        // The next turns extend it, also while a turn still holds the last
        // one's history (which stays as it was).
        let held = tree.remembered_path(Some(&MessageId::new("m9"))).unwrap().1;
        chain(&mut tree, "n", Some("m9"), 2);
        assert!(remembered_is_walked(&mut tree, "n1"));
        assert_eq!(held, tree.transcript_to(Some(&MessageId::new("m9"))));
        drop(held);
        tree.upsert(said("n2", Some("n1")));
        assert!(remembered_is_walked(&mut tree, "n2"));
        assert!(remembered_is_walked(&mut tree, "n2"), "asked again");
        // Only the leaf's own path is answered.
        assert!(tree.remembered_path(Some(&MessageId::new("n1"))).is_none());
        assert!(tree.remembered_path(None).is_none());
        // A branch: a short one is walked and the remembered path forgotten,
        // a long one is walked and remembered.
        tree.upsert(said("b", Some("m4")));
        assert!(!remembered_is_walked(&mut tree, "b"));
        assert!(tree.remembered_path(Some(&MessageId::new("n2"))).is_none());
        tree.upsert(said("c", Some("m8")));
        assert!(remembered_is_walked(&mut tree, "c"));
        assert!(remembered_is_walked(&mut tree, "n2"));
        // A reply below the leaf stored again (a turn ended after a host
        // result) and a message off the path edited: still remembered.
        tree.upsert(said("r", Some("n2")));
        tree.upsert(said("r", Some("n2")));
        tree.upsert(said("b", Some("m3")));
        assert!(tree.remembered_path(Some(&MessageId::new("n2"))).is_some());
        tree.upsert(said("u", Some("r")));
        assert!(remembered_is_walked(&mut tree, "u"));
        assert!(remembered_is_walked(&mut tree, "n2"));
        // An edit on the path, and a move of a message to another parent.
        let mut edited = said("m5", Some("m4"));
        edited.content = "edited".into();
        tree.upsert(edited);
        assert!(tree.remembered_path(Some(&MessageId::new("n2"))).is_none());
        assert!(remembered_is_walked(&mut tree, "n2"));
        tree.upsert(said("m6", Some("m2")));
        assert!(tree.remembered_path(Some(&MessageId::new("n2"))).is_none());
        assert!(remembered_is_walked(&mut tree, "n2"));
        // Unknown leaves.
        assert!(!remembered_is_walked(&mut tree, "nope"));
        tree.remember_path(None);
        assert!(tree.remembered_path(None).is_none());
        // A reload starts without one.
        assert!(remembered_is_walked(&mut tree, "n2"));
        let mut loaded = MessageTree::from_messages(tree.all().cloned().collect());
        assert!(loaded
            .remembered_path(Some(&MessageId::new("n2")))
            .is_none());
        assert!(remembered_is_walked(&mut loaded, "n2"));
        // A summary forgets it, and a path is not remembered while there is one.
        tree.upsert(summary("s", "m3"));
        assert!(tree.remembered_path(Some(&MessageId::new("n2"))).is_none());
        assert!(!remembered_is_walked(&mut tree, "n2"));
        tree.upsert(said("s", Some("m3")));
        assert!(remembered_is_walked(&mut tree, "n2"));
    }

    #[test]
    fn a_path_cut_short_or_looping_is_not_remembered() {
        // Its root's parent arrives later (a repair of the conversation).
        let mut tree = MessageTree::default();
        chain(&mut tree, "x", Some("p"), 10);
        assert!(!remembered_is_walked(&mut tree, "x9"));
        tree.upsert(said("p", None));
        assert!(remembered_is_walked(&mut tree, "x9"));
        // Parents that loop.
        let mut tree = MessageTree::from_messages(vec![said("a", Some("b")), said("b", Some("a"))]);
        assert!(!remembered_is_walked(&mut tree, "a"));
        let mut tree = MessageTree::default();
        chain(&mut tree, "y", Some("y9"), 10);
        assert!(!remembered_is_walked(&mut tree, "y9"));
    }
}
