//! Host contract; filled in by its own change.
