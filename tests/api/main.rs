//! Black-box tests, one binary: a module per feature, sharing the harnesses.

mod access;
mod agui;
mod architecture;
mod assistant_socket;
mod chat_cli;
mod cli;
mod container;
mod cors;
mod decisions;
mod embed;
mod fake_provider;
mod helpers;
mod history;
mod host_actions;
mod hostile;
mod import_cycles;
mod ingress;
mod mcp;
mod migrations;
mod mounted;
mod nginx;
mod observability;
mod openapi;
mod playground;
mod postgres;
mod process;
mod profiles;
mod prompt_prefix;
mod provider_config;
mod providers;
mod providers_e2e;
// The websocket client of the Socket.IO crate's protocol tests, shared.
#[path = "../../src/socketio/tests/protocol/raw_ws.rs"]
mod raw_ws;
mod rooms;
mod scale_out;
mod sessions;
mod smoke;
mod socketio_helpers;
mod store_faults;
mod tools;
mod traces;
mod validation;
