//! A global allocator that serves very large allocations as reserve-only memory.
//!
//! The protocol crate sizes arrays with `Vec::with_capacity(n)` where `n` is read from the
//! wire before the elements are. A hostile count (2^31 elements of a 100-byte struct) would ask
//! for hundreds of GiB; the system allocator then fails and the process aborts. Here such a
//! request is mapped with MAP_NORESERVE: address space only, no memory committed until
//! touched. The decoder then runs out of frame bytes (frames are bounded by
//! `socket.request.max.bytes`) long before touching much of it, returns an error, and the
//! mapping is released. Allocations below the threshold go to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

use crate::limits::ALLOCATION_RESERVE_ONLY_BYTES_MIN;

pub struct GuardedAlloc;

fn is_large(layout: &Layout) -> bool {
    layout.size() >= ALLOCATION_RESERVE_ONLY_BYTES_MIN && layout.align() <= 4096
}

unsafe fn map(size: usize) -> *mut u8 {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    // SAFETY: anonymous mapping with no address hint; the kernel picks a fresh range.
    let ptr =
        unsafe { libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}

// SAFETY: every pointer handed out is either from `System` (small layouts) or from `map`
// (large layouts), and is released by the same path, chosen by the same size test.
unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            // SAFETY: see `map`.
            unsafe { map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            // SAFETY: anonymous mappings are zero-filled.
            unsafe { map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(&layout) {
            // SAFETY: `ptr` came from `map` with this size.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: `ptr` came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_large(&layout) && !is_large(&new_layout) {
            // SAFETY: both old and new are system allocations.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: allocate, copy the overlap, free the old block through its own path.
        unsafe {
            let new_ptr = self.alloc(new_layout);
            if !new_ptr.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new_ptr
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_reservation_succeeds_and_is_released() {
        // 256 GiB: more than this machine's memory, as a hostile array count would ask.
        let layout = Layout::from_size_align(256usize << 30, 8).expect("layout");
        // SAFETY: paired alloc/dealloc with the same layout; only the first page is touched.
        unsafe {
            let ptr = GuardedAlloc.alloc(layout);
            assert!(!ptr.is_null());
            *ptr = 7;
            assert_eq!(*ptr, 7);
            GuardedAlloc.dealloc(ptr, layout);
        }
    }
}
