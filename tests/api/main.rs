//! Black-box tests, one binary: a module per feature, sharing the harnesses.

mod agui;
mod assistant_socket;
mod fake_provider;
mod helpers;
mod providers;
mod raw_ws;
mod smoke;
mod socketio_helpers;
mod socketio_protocol;
