//! The binary's global allocator: mimalloc, asked the way the standard
//! library asks the C allocator.
//!
//! The `mimalloc` crate's `GlobalAlloc` sends every request through
//! `mi_malloc_aligned`, whose fast path re-checks the alignment and misses
//! for any block over 1 KiB or any empty page, and whose fallback costs
//! several times a plain `mi_malloc`. A turn makes about 150 allocations,
//! almost all with an alignment `mi_malloc` already guarantees, so those go
//! straight to `mi_malloc` (the same rule `std::alloc::System` applies to
//! `malloc`); only the rare over-aligned type (cache-line padded queues)
//! takes the aligned entry points.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every `mi_malloc` block of at least this size has
/// (`MI_MAX_ALIGN_SIZE`, as C's `max_align_t` on the targets we build for).
const MIN_ALIGN: usize = 16;

pub struct MiMalloc;

/// Whether a plain `mi_malloc` block of `layout.size()` bytes is aligned
/// enough: a block is aligned to `MIN_ALIGN`, or to its size when smaller,
/// and a Rust size is always a multiple of its alignment.
fn plain(layout: &Layout) -> bool {
    layout.align() <= MIN_ALIGN && layout.align() <= layout.size()
}

// SAFETY: every block comes from mimalloc and goes back to it; `plain`
// only picks the unaligned entry points where their alignment suffices.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(&layout) {
            mi::mi_malloc(layout.size()).cast()
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(&layout) {
            mi::mi_zalloc(layout.size()).cast()
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = Layout::from_size_align_unchecked(new_size, layout.align());
        if plain(&grown) {
            mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every size class up to a few pages, at every alignment a
    /// Rust type of that size can ask for, come back aligned, and survive
    /// growing and shrinking across the plain/aligned boundary.
    #[test]
    fn every_block_has_the_alignment_its_layout_asks() {
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in (1..=9000).filter(|size| size % align == 0) {
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    for zeroed in [false, true] {
                        let block = if zeroed {
                            MiMalloc.alloc_zeroed(layout)
                        } else {
                            MiMalloc.alloc(layout)
                        };
                        assert!(!block.is_null());
                        assert_eq!(block as usize % align, 0, "size {size}, align {align}");
                        if zeroed {
                            assert!(std::slice::from_raw_parts(block, size)
                                .iter()
                                .all(|b| *b == 0));
                        }
                        block.write_bytes(0xA5, size);
                        let grown = MiMalloc.realloc(block, layout, size * 3);
                        assert_eq!(grown as usize % align, 0);
                        assert!(std::slice::from_raw_parts(grown, size)
                            .iter()
                            .all(|b| *b == 0xA5));
                        let grown_layout = Layout::from_size_align(size * 3, align).unwrap();
                        let shrunk = MiMalloc.realloc(grown, grown_layout, size);
                        assert_eq!(shrunk as usize % align, 0);
                        assert!(std::slice::from_raw_parts(shrunk, size)
                            .iter()
                            .all(|b| *b == 0xA5));
                        MiMalloc.dealloc(shrunk, layout);
                    }
                }
            }
        }
    }
}
