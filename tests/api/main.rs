//! Black-box tests, one binary: a module per feature, sharing the harnesses.

mod agui;
mod assistant_socket;
mod decisions;
mod fake_provider;
mod helpers;
mod host_actions;
mod nginx;
mod postgres;
mod prompt_prefix;
mod providers;
mod providers_e2e;
mod raw_ws;
mod scale_out;
mod sessions;
mod smoke;
mod socketio_helpers;
mod socketio_protocol;
mod store_faults;
mod tools;
mod validation;
