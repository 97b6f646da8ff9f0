//! Bytes the in-memory store holds per idle session: 10,000 sessions of one
//! echo exchange (the messages `loadgen idle` leaves), written and settled
//! as a hibernating actor does, counted by a global allocator that tallies
//! the bytes asked for and the same rounded up to mimalloc's size classes.
//!
//! Usage: cargo run --release -p assistant-actors --example store_bytes

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use actors::conversation::{Message, SessionRecord};
use actors::ids::SessionId;
use actors::store::memory::MemoryStore;
use actors::store::{Store, Written};
use futures_util::FutureExt;

const N_SESSIONS: usize = 10_000;

static ASKED: AtomicIsize = AtomicIsize::new(0);
static IN_CLASSES: AtomicIsize = AtomicIsize::new(0);
static N_BLOCKS: AtomicIsize = AtomicIsize::new(0);

/// mimalloc's size class of a block: 8-byte steps to 64, then four classes
/// per power of two.
fn size_class(size: usize) -> usize {
    if size <= 64 {
        return size.div_ceil(8) * 8;
    }
    let step = (1usize << (usize::BITS - 1 - (size - 1).leading_zeros())) / 4;
    size.div_ceil(step) * step
}

fn tally(layout: Layout, sign: isize) {
    let size = layout.size();
    ASKED.fetch_add(sign * size as isize, Ordering::Relaxed);
    IN_CLASSES.fetch_add(sign * size_class(size) as isize, Ordering::Relaxed);
    N_BLOCKS.fetch_add(sign, Ordering::Relaxed);
}

struct Counting;

// SAFETY: every request is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        tally(layout, 1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        tally(layout, -1);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn now() -> [isize; 3] {
    [&ASKED, &IN_CLASSES, &N_BLOCKS].map(|count| count.load(Ordering::Relaxed))
}

fn message(json: &str) -> Arc<Message> {
    Arc::new(serde_json::from_str(json).expect("a message"))
}

fn written(result: Option<Result<Written, actors::store::StoreError>>) -> u64 {
    match result {
        Some(Ok(Written::Committed(version))) => version,
        other => panic!("not written: {other:?}"),
    }
}

fn main() {
    let store = MemoryStore::new();
    // One principal for every session, as the server shares it.
    let owner: Arc<str> = Arc::from("local");
    let before = now();
    for index in 0..N_SESSIONS {
        let id = SessionId::new(format!("load-idle-{index}"));
        let mut record = SessionRecord::new(id.clone(), 1_796_616_053_248);
        record.owner_id = Some(owner.clone());
        let version = written(store.save_session(0, &record).now_or_never());
        let user = message(
            r#"{"id":"m0","parent_id":null,"role":"user","content":"hello number 0","created_at":1796616053248}"#,
        );
        let reply = message(
            r#"{"id":"m0:reply","parent_id":"m0","role":"assistant","segments":[{"kind":"text","text":"Echo: hello number 0"}],"usage":{"input_tokens":94,"output_tokens":5,"total_tokens":99,"requests":1,"tool_calls":0,"cost_usd":null},"model":"builtin:echo","created_at":1796616053248}"#,
        );
        record.title = Some(Arc::from(user.content.as_str()));
        record.turn_number = 1;
        record.active_leaf = Some(reply.id.clone());
        written(
            store
                .save_messages(version, &record, &[user, reply])
                .now_or_never(),
        );
        drop(record);
        store.settle(&id);
    }
    let after = now();
    let per_session = |index: usize| (after[index] - before[index]) as f64 / N_SESSIONS as f64;
    println!(
        "per idle session: {:.0} bytes asked, {:.0} in mimalloc's size classes, {:.2} blocks",
        per_session(0),
        per_session(1),
        per_session(2)
    );
}
