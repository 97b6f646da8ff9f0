//! The black-box test binary: one module per feature, sharing `helpers`.

mod helpers;
mod raw_ws;
mod socketio_protocol;
