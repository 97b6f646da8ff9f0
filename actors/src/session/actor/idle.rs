//! The shell's clock: when an idle actor stops (hibernates) and when the
//! registry's sweeper next asks it. The store holds everything it would
//! reload, so stopping loses only the (unstored) screenshot.

use std::time::{Duration, Instant};

use actix::prelude::*;

use super::SessionActor;
use crate::session::grace::FIRST_EXCHANGE_GRACE;
use crate::session::requests::CheckIdle;

/// With a zero timeout (the in-memory default), a longer session stays for
/// `HOT_WINDOW`: a conversation would pay its reload on every turn.
const HOT_MESSAGES: usize = 16;
const HOT_WINDOW: Duration = Duration::from_secs(5);
/// With a zero timeout, a session in conversation stays this long: its next
/// request usually comes within it; an abandoned one leaves within a second.
const SHORT_WINDOW: Duration = Duration::from_millis(500);
/// How long a session waiting for a host result keeps its screenshot.
const SCREENSHOT_GRACE: Duration = Duration::from_secs(300);
const BUSY_RECHECK: Duration = Duration::from_secs(1);
/// The user's message and the reply.
const FIRST_EXCHANGE: usize = 2;

impl Handler<CheckIdle> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: CheckIdle, ctx: &mut Context<Self>) {
        if !self.stop_if_idle(ctx, self.idle_after()) {
            self.schedule_idle_check(ctx);
        }
    }
}

impl SessionActor {
    /// Stops (true) when nothing is live or waiting and quiet for `after`.
    fn stop_if_idle(&self, ctx: &mut Context<Self>, after: Duration) -> bool {
        let stops = self.is_quiet(ctx) && self.last_activity.elapsed() >= after;
        if stops {
            ctx.stop();
        }
        stops
    }

    fn is_quiet(&self, ctx: &Context<Self>) -> bool {
        !self.state.is_running() && self.state.waiting.is_empty() && !ctx.waiting()
    }

    /// Tells the sweeper when this actor is next worth asking.
    pub(super) fn schedule_idle_check(&self, ctx: &Context<Self>) {
        let window = self.idle_after();
        let due = match self.is_quiet(ctx) {
            true => self.last_activity + window,
            false => Instant::now() + window.max(BUSY_RECHECK),
        };
        self.idle_check.set(due);
    }

    /// The configured timeout, or with zero the window for its size. One
    /// waiting for a host result keeps its (unstored) screenshot longer.
    fn idle_after(&self) -> Duration {
        let state = &self.state;
        let after = match state.deps.config.idle_timeout {
            timeout if !timeout.is_zero() => timeout,
            _ if state.tree.len() > HOT_MESSAGES => HOT_WINDOW,
            _ if !self.is_first_exchange() => SHORT_WINDOW,
            _ if self.grace.is_some() => FIRST_EXCHANGE_GRACE,
            _ => Duration::ZERO,
        };
        match state.screenshot.is_some() && state.pending().is_some() {
            true => after.max(SCREENSHOT_GRACE),
            false => after,
        }
    }

    fn is_first_exchange(&self) -> bool {
        self.state.tree.len() <= FIRST_EXCHANGE && self.state.pending().is_none()
    }

    /// With a zero timeout, a session of one exchange stops at once unless
    /// it gets a grace slot (`grace.rs`).
    pub(super) fn hibernate_if_configured(&mut self, ctx: &mut Context<Self>) {
        self.last_activity = Instant::now();
        let may_stay = self.state.deps.config.idle_timeout.is_zero() && self.is_first_exchange();
        if !may_stay {
            self.grace = None;
        } else if self.grace.is_none() {
            self.grace = self.registry.graces.try_take();
        }
        if !self.idle_after().is_zero() || !self.stop_if_idle(ctx, Duration::ZERO) {
            self.schedule_idle_check(ctx);
        }
    }
}
