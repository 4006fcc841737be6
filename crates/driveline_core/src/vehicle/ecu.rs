//! The engine controller: idle speed control, rev limiter, stall and restart, ignition,
//! torque-reduction requests. It runs once per step, before the solve, and produces the
//! effective throttle the torque map sees and the starter torque.
//!
//! # The law
//! ```text
//! theta_idle = clamp(theta_ff + kp e + ki integral(e), 0, max_throttle),  e = (n_idle - n) / n_idle
//! theta      = theta_idle + (1 - theta_idle) theta_driver
//! theta_eff  = running && !cut ? theta (1 - r) : 0
//! ```
//! `theta_ff` is the feed-forward that balances the closed-throttle torque at idle speed, so the
//! PI part only corrects disturbances (the engine's own losses do not pull the speed down first).
//! `r` in [0, 1] is the torque-reduction request of a shift controller (1 = ignition cut). With
//! `theta_eff = 0` the map gives the closed-throttle torque: friction and pumping only. The
//! integrator runs only while its output is inside its limits (no wind-up).
//!
//! - **Stall**: running and `n < n_stall` -> not running; no combustion until restarted.
//! - **Starter**: while the starter input is on, the starter torque `T_s(n)` acts on the
//!   crankshaft. Reaching `n_start` with the ignition on makes the engine run (by the starter,
//!   or by a bump start through the driveline).
//! - **Rev limiter**: `n > n_limit` cuts the fuel; it returns once `n < n_limit - hysteresis`
//!   and the cut has lasted `hold`.

use super::spec::EngineSpec;
use crate::torque_map::RPM;

/// Controller state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ecu {
    /// Combustion possible (not stalled, ignition on).
    pub running: bool,
    /// Rev limiter fuel cut active.
    pub limiter_cut: bool,
    cut_since: f64,
    integral: f64,
    /// Idle controller throttle of the last step.
    pub idle_throttle: f64,
    feedforward: f64,
}

/// What the controller asks of the engine this step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EcuOutput {
    /// Effective throttle for the torque map, [0, 1].
    pub throttle: f64,
    /// Starter torque on the crankshaft, N m.
    pub starter: f64,
}

/// Events of the engine controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcuEvent {
    /// The engine stalled.
    Stalled,
    /// The engine started.
    Started,
    /// The rev limiter cut the fuel.
    LimiterCut,
}

impl Ecu {
    /// A running engine at idle, with the idle feed-forward taken from the map.
    pub fn new(spec: &EngineSpec) -> Self {
        let w = spec.idle_rpm * RPM;
        let feedforward = spec.map.build().map_or(0.0, |m| {
            let (closed, full) = (m.eval(0.0, w).0, m.eval(1.0, w).0);
            if full > closed { (-closed / (full - closed)).clamp(0.0, 1.0) } else { 0.0 }
        });
        Self { running: true, limiter_cut: false, cut_since: 0.0, integral: 0.0, idle_throttle: 0.0, feedforward }
    }

    /// One control step at time `t`, engine speed `w` (rad/s).
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        spec: &EngineSpec,
        t: f64,
        dt: f64,
        w: f64,
        driver: f64,
        reduction: f64,
        ignition: bool,
        starter: bool,
        mut event: impl FnMut(EcuEvent),
    ) -> EcuOutput {
        let n = w / RPM;
        let start_rpm = spec.start_rpm.unwrap_or(spec.stall_rpm + 100.0);
        if self.running && (!ignition || n < spec.stall_rpm) {
            self.running = false;
            self.integral = 0.0;
            event(EcuEvent::Stalled);
        } else if !self.running && ignition && n >= start_rpm {
            self.running = true;
            event(EcuEvent::Started);
        }
        // Rev limiter with hysteresis and hold.
        if !self.limiter_cut && n > spec.rev_limiter.rpm {
            self.limiter_cut = true;
            self.cut_since = t;
            event(EcuEvent::LimiterCut);
        } else if self.limiter_cut
            && n < spec.rev_limiter.rpm - spec.rev_limiter.hysteresis_rpm
            && t - self.cut_since >= spec.rev_limiter.hold
        {
            self.limiter_cut = false;
        }
        // Idle PI, conditional integration.
        let c = &spec.idle;
        let e = (spec.idle_rpm - n) / spec.idle_rpm;
        let ff = self.feedforward;
        let raw = ff + c.kp * e + c.ki * (self.integral + e * dt);
        if self.running && raw > 0.0 && raw < c.max_throttle {
            self.integral += e * dt;
        } else if !self.running {
            self.integral = 0.0;
        }
        self.idle_throttle =
            if self.running { (ff + c.kp * e + c.ki * self.integral).clamp(0.0, c.max_throttle) } else { 0.0 };
        let driver = if driver.is_finite() { driver.clamp(0.0, 1.0) } else { 0.0 };
        let theta = self.idle_throttle + (1.0 - self.idle_throttle) * driver;
        let r = if reduction.is_finite() { reduction.clamp(0.0, 1.0) } else { 0.0 };
        let throttle = if self.running && !self.limiter_cut { theta * (1.0 - r) } else { 0.0 };
        let starter = if starter { spec.starter.eval(n.max(0.0)) } else { 0.0 };
        EcuOutput { throttle, starter }
    }
}

crate::snapshot::persist_fields!(Ecu { running, limiter_cut, cut_since, integral, idle_throttle, feedforward });
