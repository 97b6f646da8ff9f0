//! The black-box test binary: one module per feature, sharing `helpers`.

mod helpers;
mod socketio_protocol;
