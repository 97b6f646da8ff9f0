//! The Socket.IO transport's protocol tests, one binary: `cases` holds them,
//! `support` starts the servers and runs the stock clients, `raw_ws` is a
//! websocket client that sends what the stock clients never would.

mod cases;
pub mod raw_ws;
mod support;
