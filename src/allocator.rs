//! The global allocator: mimalloc, asked for plain blocks whenever its plain blocks are aligned
//! enough.
//!
//! The `mimalloc` crate's allocator asks for an aligned block on every allocation. mimalloc 3
//! serves an aligned request above 1 KiB whose size is not a power of two by over-allocating
//! and offsetting the pointer, about 300 instructions instead of 100, even when the alignment
//! asked for is 8 and every mimalloc block is 16-byte aligned anyway. A request's boxed
//! futures and its policy session are such blocks: 4 per policy hit (docs/BENCHMARKS.md,
//! "Session 8: the one-header plugin's hit", the allocator's row). This asks for a plain block when the alignment
//! is one mimalloc gives every block (`MI_MAX_ALIGN_SIZE`, 16 bytes, for blocks at least that
//! large), and for an aligned one otherwise.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned,
};

/// `MI_MAX_ALIGN_SIZE`: the alignment of every mimalloc block of at least this many bytes.
const PLAIN_ALIGNMENT: usize = 16;

pub struct MiMalloc;

fn plain_block_fits(layout: &Layout) -> bool {
    layout.align() <= PLAIN_ALIGNMENT && layout.align() <= layout.size()
}

// SAFETY: each method hands mimalloc's own functions the size (and, where a plain block would
// not be aligned enough, the alignment) the layout asks for, and frees with `mi_free`, which
// takes blocks from all of them.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain_block_fits(&layout) {
            unsafe { mi_malloc(layout.size()).cast() }
        } else {
            unsafe { mi_malloc_aligned(layout.size(), layout.align()).cast() }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain_block_fits(&layout) {
            unsafe { mi_zalloc(layout.size()).cast() }
        } else {
            unsafe { mi_zalloc_aligned(layout.size(), layout.align()).cast() }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = Layout::from_size_align(new_size, layout.align()).unwrap_or(layout);
        if plain_block_fits(&grown) {
            unsafe { mi_realloc(ptr.cast::<c_void>(), new_size).cast() }
        } else {
            unsafe { mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_as_asked_through_alloc_zeroed_and_realloc() {
        for (size, align) in [(8, 8), (24, 16), (1032, 8), (3000, 16), (100, 64), (5000, 4096)] {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let zeroed = MiMalloc.alloc_zeroed(layout);
                assert_eq!(zeroed as usize % align, 0, "{size}/{align}");
                assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|b| *b == 0));
                let grown = MiMalloc.realloc(zeroed, layout, size * 3);
                assert_eq!(grown as usize % align, 0, "{size}/{align} grown");
                MiMalloc.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
            }
        }
    }
}
