//! Drive cycles and the driver who follows them: a speed trace ([`Cycle`]) and a driver model
//! ([`Driver`]) that turns the trace into pedals, clutch and gear choices for any shipped
//! vehicle: automatic (selector in D), manual (clutch and lever) or sequential (shift pulses).
//!
//! # The driver
//! - **Speed**: a two-degree-of-freedom controller on the acceleration the trace asks for:
//!   `a = a_trace(t + preview) + kp (v_trace - v) + ki int (v_trace - v)`, then throttle
//!   `a / a_throttle` or brake `-a / a_brake` (anti-windup: the integral stops while a pedal
//!   saturates). The trace is read `preview` ahead, as a human driver reads the road.
//! - **Manual gearbox**: clutch down and neutral while stopped; first gear and a clutch release
//!   that follows the engine speed for the launch (no stall); upshift above `upshift_rpm`
//!   (raised with the pedal), downshift below `downshift_rpm`, but not into a gear whose engine
//!   speed would already call for the upshift back (a truck short of power would hunt); each
//!   shift is clutch down, throttle off, the lever, wait for the dogs, clutch up over
//!   `clutch_release`; the next shift only with the clutch up and a second after the last;
//!   clutch down again below walking pace.
//! - **Wheelspin**: when a tyre slips forward by more than 0.5 m/s plus 10 % of the speed, the
//!   throttle comes back in proportion to the excess (to 0.1 at twice the allowance), and the
//!   driver does not upshift until the tyres grip again (wheelspin is not speed).
//! - **Hunting**: a downshift at full throttle within 3 s of the upshift before it means the
//!   higher gear cannot hold the speed (a loaded truck on a grade loses it while the clutch is
//!   down): the driver then holds the lower gear for 8 s before upshifting again.
//! - **Hill start**: rolling back while the trace asks to go forward, the driver brakes, the
//!   harder the faster it rolls (full brake at 0.32 m/s backwards), and lets the brake off as
//!   the drive takes the car; on a level road a launch never rolls back, so this never acts.
//! - **Time**: every rate is per second and every delay in seconds, so the driver decides the
//!   same at any step; its input holds over a step.
//! - **Sequential gearbox**: the same choices, given as shift pulses; the box's auto-clutch does
//!   launches and stops.

use super::{DriverInput, GearboxKind, Telemetry, VehicleSpec};
use crate::automatic::Selector;

/// A speed trace: time, s, and speed, m/s; linear between samples, held at the ends.
///
/// Deserialised through [`Cycle::new`]'s checks (a saved scene cannot load a trace that
/// [`Cycle::speed_at`] cannot read).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "CycleFields")]
pub struct Cycle {
    /// Name (file stem).
    pub name: String,
    /// Sample times, s, increasing.
    pub time: Vec<f64>,
    /// Speeds, m/s, >= 0.
    pub speed: Vec<f64>,
}

/// `at % d` to the bit: `at` itself inside `[0, d)`, `at - d` inside `[d, 2 d)` (exact there:
/// `d <= at < 2 d`), the remainder elsewhere.
#[inline(always)]
fn lap(at: f64, d: f64) -> f64 {
    if at >= d && at < 2.0 * d {
        at - d
    } else if at >= 0.0 && at < d {
        at
    } else {
        at % d
    }
}

/// What is wrong with a trace's sample at time `t`, s, of speed `v`, m/s, after a sample at
/// `before`, s, if anything: the rules [`Cycle::new`] and [`Cycle::parse`] share.
fn sample_fault(t: f64, v: f64, before: Option<f64>) -> Option<String> {
    if !t.is_finite() || !v.is_finite() || v < 0.0 {
        return Some("time and speed must be finite, speed >= 0 m/s".into());
    }
    before.is_some_and(|p| t <= p).then(|| format!("time {t} s does not increase"))
}

/// A [`Cycle`]'s fields as a file holds them, before [`Cycle::new`] checks them.
#[derive(serde::Deserialize)]
struct CycleFields {
    name: String,
    time: Vec<f64>,
    speed: Vec<f64>,
}

impl TryFrom<CycleFields> for Cycle {
    type Error = String;
    fn try_from(f: CycleFields) -> Result<Cycle, String> {
        Cycle::new(f.name, f.time, f.speed)
    }
}

impl Cycle {
    /// A trace from its samples: at least two, as many speeds as times, every value finite,
    /// times increasing, speeds >= 0 m/s. The error says which sample breaks which rule.
    pub fn new(name: impl Into<String>, time: Vec<f64>, speed: Vec<f64>) -> Result<Cycle, String> {
        let name = name.into();
        if time.len() != speed.len() {
            return Err(format!("{name}: {} times but {} speeds", time.len(), speed.len()));
        }
        if time.len() < 2 {
            return Err(format!("{name}: a cycle needs at least two samples"));
        }
        for (k, (&t, &v)) in time.iter().zip(&speed).enumerate() {
            if let Some(fault) = sample_fault(t, v, k.checked_sub(1).map(|p| time[p])) {
                return Err(format!("{name}: sample {k}: {fault}"));
            }
        }
        Ok(Cycle { name, time, speed })
    }

    /// Parses `time_s,speed_mps` CSV (a header line, then one sample per line); errors name
    /// the line.
    pub fn parse(text: &str, name: &str) -> Result<Cycle, String> {
        let mut time = Vec::new();
        let mut speed = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || (k == 0 && line.starts_with(|c: char| c.is_alphabetic())) {
                continue;
            }
            let mut it = line.split(',');
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                return Err(format!("{name}:{}: expected `time_s,speed_mps`, got `{line}`", k + 1));
            };
            let t: f64 = a.trim().parse().map_err(|_| format!("{name}:{}: time `{a}` is not a number", k + 1))?;
            let v: f64 = b.trim().parse().map_err(|_| format!("{name}:{}: speed `{b}` is not a number", k + 1))?;
            if let Some(fault) = sample_fault(t, v, time.last().copied()) {
                return Err(format!("{name}:{}: {fault}", k + 1));
            }
            time.push(t);
            speed.push(v);
        }
        if time.len() < 2 {
            return Err(format!("{name}: a cycle needs at least two samples"));
        }
        Ok(Cycle { name: name.to_string(), time, speed })
    }

    /// Duration, s.
    pub fn duration(&self) -> f64 {
        self.time[self.time.len() - 1]
    }

    /// Where a driver that repeats the trace reads it at `at` seconds from its start: `at %`
    /// [`Cycle::duration`] to the bit, without the division where it is not needed (`at`
    /// itself inside the first lap, `at - duration` inside the second, exact there). A fleet's
    /// drivers take it every step.
    #[inline(always)]
    pub fn lap(&self, at: f64) -> f64 {
        lap(at, self.duration())
    }

    /// Speed at `t`, m/s (linear; held at the ends).
    pub fn speed_at(&self, t: f64) -> f64 {
        let k = self.after(t);
        if k == 0 {
            return self.speed[0];
        }
        if k >= self.time.len() {
            return self.speed[self.speed.len() - 1];
        }
        let (t0, t1) = (self.time[k - 1], self.time[k]);
        let s = (t - t0) / (t1 - t0);
        self.speed[k - 1] + s * (self.speed[k] - self.speed[k - 1])
    }

    /// The index of the first sample after `t` (`time.partition_point(|&x| x <= t)`): on an
    /// evenly sampled trace (most are: one sample a second) found where `t`'s share of the
    /// whole trace points, checked against the samples either side; elsewhere by bisection.
    /// The same index either way, as the times increase.
    #[inline]
    fn after(&self, t: f64) -> usize {
        let time = &self.time[..];
        let n = time.len();
        if n >= 2 {
            let (first, last) = (time[0], time[n - 1]);
            // (A NaN or a time outside the trace fails the checks below and is bisected.)
            let guess = (((t - first) / (last - first) * (n - 1) as f64) as usize).min(n);
            for k in [guess + 1, guess + 2, guess] {
                if (1..n).contains(&k) && time[k - 1] <= t && t < time[k] {
                    return k;
                }
            }
        }
        time.partition_point(|&x| x <= t)
    }

    /// Distance of the trace, m (trapezoidal).
    pub fn distance(&self) -> f64 {
        self.time.windows(2).zip(self.speed.windows(2)).map(|(t, v)| 0.5 * (v[0] + v[1]) * (t[1] - t[0])).sum()
    }
}

/// A downshift at full throttle within this time of the last upshift is a hunt, s; the driver
/// then holds the lower gear for [`HUNT_HOLD`] s.
const HUNT_WINDOW: f64 = 3.0;
const HUNT_HOLD: f64 = 8.0;

/// The speed backwards, m/s, above which a driver who wants to go forward (a hill start) brakes.
const ROLL_BACK: f64 = 0.02;
/// How much faster than [`ROLL_BACK`] the car rolls back when the driver brakes fully, m/s.
const ROLL_BACK_FULL_BRAKE: f64 = 0.3;

/// Tyre slip the driver accepts before lifting (a launch), m/s, and the share of the speed
/// added to it (a slip ratio).
const SPIN_SLIP: f64 = 0.5;
const SPIN_RATIO: f64 = 0.1;
/// The least throttle a driver keeps while lifting for wheelspin.
const SPIN_THROTTLE: f64 = 0.1;

/// Driver tuning. Defaults suit every shipped vehicle.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DriverParams {
    /// How far ahead the trace is read, s. Default 0.8.
    pub preview: f64,
    /// Speed error gain, 1/s. Default 1.2.
    pub kp: f64,
    /// Integral gain, 1/s^2. Default 0.3.
    pub ki: f64,
    /// Acceleration at full throttle used to scale the pedal, m/s^2. Default 2.5.
    pub a_throttle: f64,
    /// Deceleration at full brake, m/s^2. Default 8.
    pub a_brake: f64,
    /// Manual boxes: upshift engine speed at light throttle, rpm. Default 2300.
    pub upshift_rpm: f64,
    /// Added to the upshift speed at full throttle, rpm. Default 2500.
    pub upshift_rpm_full: f64,
    /// Manual boxes: downshift engine speed, rpm. Default 1300.
    pub downshift_rpm: f64,
    /// Manual boxes: time to let the clutch up after a shift, s. Default 0.35.
    pub clutch_release: f64,
}

impl Default for DriverParams {
    fn default() -> Self {
        Self {
            preview: 0.8,
            kp: 1.2,
            ki: 0.3,
            a_throttle: 2.5,
            a_brake: 8.0,
            upshift_rpm: 2300.0,
            upshift_rpm_full: 2500.0,
            downshift_rpm: 1300.0,
            clutch_release: 0.35,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
enum Phase {
    /// Clutch down, waiting (stopped or rolling to a stop).
    Stopped,
    /// Moving off in first: the clutch follows the engine speed.
    Launch,
    /// Clutch up.
    Driving,
    /// Clutch down, lever to `gear`, until the dogs are in.
    Shifting,
    /// Clutch coming up after a shift, since `t`.
    Releasing(f64),
}

/// The driver model (see the module docs).
///
/// `Clone` and serde: its whole state saves beside a [`crate::VehicleSnapshot`] (the driver is
/// not part of the [`crate::Vehicle`]), so that a run restored from both continues bit for bit.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Driver {
    params: DriverParams,
    integral: f64,
    gear: i32,
    phase: Phase,
    kind: Option<GearboxKind>,
    top: i32,
    idle_rpm: f64,
    redline: f64,
    /// Forward gear ratios, first first (manual and sequential boxes).
    ratios: Vec<f64>,
    last_shift: f64,
    /// When the last upshift was made, s, and until when the driver holds the gear after a
    /// hunt (see the module docs).
    #[serde(default)]
    last_upshift: Option<f64>,
    #[serde(default)]
    hold_until: f64,
    pulse: bool,
}

impl Driver {
    /// A driver for `spec`'s vehicle.
    pub fn new(spec: &VehicleSpec, params: DriverParams) -> Self {
        let kind = spec.gearbox.as_ref().map(|g| g.kind);
        let top = spec.gearbox.as_ref().map_or(1, |g| g.ratios.len() as i32);
        Self {
            params,
            integral: 0.0,
            gear: 0,
            phase: Phase::Stopped,
            kind,
            top,
            idle_rpm: spec.engine.idle_rpm,
            redline: spec.engine.rev_limiter.rpm,
            ratios: spec.gearbox.as_ref().map_or_else(Vec::new, |g| g.ratios.clone()),
            // (The lowest finite time: "never", and it survives a JSON round trip.)
            last_shift: f64::MIN,
            last_upshift: None,
            hold_until: f64::MIN,
            pulse: false,
        }
    }

    /// The input for the step starting at `tel.time`, following `cycle`.
    pub fn input(&mut self, cycle: &Cycle, tel: &Telemetry, dt: f64) -> DriverInput {
        self.input_at(cycle, tel.time, tel, dt)
    }

    /// The input for the step starting at `time` on `cycle`, from the vehicle's telemetry `tel`
    /// (whose own `time` is not read): what [`Driver::input`] gives for a copy of `tel` with
    /// `time` in it, without the copy (a fleet's drivers read the cycle at offsets of their own).
    pub fn input_at(&mut self, cycle: &Cycle, time: f64, tel: &Telemetry, dt: f64) -> DriverInput {
        let p = self.params;
        let t = time;
        let v = tel.speed;
        let target = cycle.speed_at(t);
        let ahead = cycle.speed_at(t + p.preview);
        let a_ff = (ahead - target) / p.preview;
        let e = target - v;
        let mut a = a_ff + p.kp * e + self.integral;
        let stopping = target < 0.05 && ahead < 0.05;
        if stopping {
            // Hold the car with the brake; forget the integral.
            self.integral = 0.0;
            a = a.min(-0.15 * p.a_brake);
        }
        let mut throttle = (a / p.a_throttle).clamp(0.0, 1.0);
        let brake = (-a / p.a_brake).clamp(0.0, 1.0);
        // Wheelspin: the foot comes back as the driven wheels spin faster than they grip.
        let spin = self.spin(tel);
        if spin > 0.0 {
            throttle = throttle.min((1.0 - spin).max(SPIN_THROTTLE));
        }
        // Anti-windup: integrate only while no pedal saturates.
        if !stopping && throttle < 1.0 && brake < 1.0 {
            self.integral = (self.integral + p.ki * e * dt).clamp(-p.a_brake, p.a_throttle);
        }
        let mut input = DriverInput { throttle, brake, selector: Selector::Drive, ..DriverInput::default() };
        match self.kind {
            None => {}
            Some(kind) => self.gearbox(kind, t, tel, target, ahead, &mut input),
        }
        // A hill start: rolling back while it wants to go forward, the driver's foot goes to
        // the brake, the harder the faster it rolls, and comes off as the drive takes the car.
        if v < -ROLL_BACK && (target > 0.3 || ahead > 0.3) {
            input.brake = input.brake.max(((-v - ROLL_BACK) / ROLL_BACK_FULL_BRAKE).min(1.0));
        }
        input
    }

    /// The clutch, gear and lever for the step starting at `t`.
    fn gearbox(
        &mut self,
        kind: GearboxKind,
        t: f64,
        tel: &Telemetry,
        target: f64,
        ahead: f64,
        input: &mut DriverInput,
    ) {
        let p = self.params;
        let rpm = tel.engine_rpm;
        let engaged = tel.engaged_gear;
        let want_move = ahead > 0.3 || target > 0.3;
        let sequential = kind == GearboxKind::Sequential;
        let up_rpm = (p.upshift_rpm + p.upshift_rpm_full * input.throttle).min(0.92 * self.redline);
        match self.phase {
            Phase::Stopped => {
                input.clutch = 1.0;
                input.throttle = 0.0;
                self.gear = if want_move { 1 } else { 0 };
                if want_move && engaged == 1 {
                    self.phase = Phase::Launch;
                }
            }
            Phase::Launch => {
                self.gear = 1;
                // Release as the engine pulls above idle; never below it (no stall).
                let pull = ((rpm - 1.05 * self.idle_rpm) / 900.0).clamp(0.0, 1.0);
                input.clutch = 1.0 - 0.45 - 0.55 * pull;
                input.throttle = input.throttle.max(0.18);
                if pull >= 1.0 || (tel.clutch_slip.abs() < 2.0 && tel.speed > 1.0) {
                    self.phase = Phase::Releasing(t);
                }
                if !want_move {
                    self.phase = Phase::Stopped;
                }
            }
            Phase::Driving | Phase::Releasing(_) => {
                if let Phase::Releasing(since) = self.phase {
                    let x = ((t - since) / p.clutch_release).clamp(0.0, 1.0);
                    input.clutch = 0.6 * (1.0 - x);
                    if x >= 1.0 {
                        self.phase = Phase::Driving;
                    }
                }
                // A driver shifts again with the clutch fully up, and not within a second of the
                // last shift: a decision taken while letting the clutch out would read the engine
                // speed of a slipping clutch.
                let settled = self.phase == Phase::Driving && t - self.last_shift > 1.0;
                if !want_move && tel.speed < 2.5 || (rpm < 0.95 * self.idle_rpm && self.gear == 1) {
                    self.phase = Phase::Stopped;
                    input.clutch = 1.0;
                } else if settled
                    && rpm > up_rpm
                    && self.gear < self.top
                    && self.spin(tel) == 0.0
                    && t >= self.hold_until
                {
                    self.gear += 1;
                    self.last_upshift = Some(t);
                    self.start_shift(t, input);
                } else if settled && rpm < p.downshift_rpm && self.gear > 1 && self.rpm_in(rpm, -1) < up_rpm {
                    // Pulling hard and back down within seconds of the upshift: the higher gear
                    // cannot hold the speed (a loaded truck on a grade loses it while the
                    // clutch is down); hold this one a while instead of hunting.
                    if input.throttle >= 0.9 && self.last_upshift.is_some_and(|u| t - u < HUNT_WINDOW) {
                        self.hold_until = t + HUNT_HOLD;
                    }
                    self.gear -= 1;
                    self.start_shift(t, input);
                }
            }
            Phase::Shifting => {
                input.clutch = 1.0;
                input.throttle = 0.0;
                if engaged == self.gear {
                    self.phase = Phase::Releasing(t);
                } else if t - self.last_shift > 2.0 {
                    // Refused (blocked dogs): try again from the clutch.
                    self.phase = Phase::Releasing(t);
                }
            }
        }
        if sequential {
            // The lever is a barrel: pulse towards the wanted gear, one step at a time; the
            // box's auto-clutch launches and stops the car.
            input.clutch = 0.0;
            let pulse_due = !self.pulse && engaged != self.gear && tel.selected_gear == engaged;
            if pulse_due {
                input.shift_up = self.gear > engaged;
                input.shift_down = self.gear < engaged;
            }
            self.pulse = input.shift_up || input.shift_down;
            if self.phase == Phase::Shifting && engaged == self.gear {
                self.phase = Phase::Driving;
            }
            if matches!(self.phase, Phase::Launch | Phase::Releasing(_)) {
                self.phase = Phase::Driving;
            }
            if self.phase == Phase::Stopped && want_move && engaged == 1 {
                self.phase = Phase::Driving;
            }
            if self.phase != Phase::Shifting && self.phase != Phase::Stopped {
                input.throttle = input.throttle.max(if tel.speed < 2.0 && want_move { 0.2 } else { 0.0 });
            }
        } else {
            input.gear = self.gear;
        }
    }

    /// The engine speed, rpm, that `rpm` in the present gear becomes `step` gears up (down for a
    /// negative `step`): a driver does not shift into a gear that would call for the opposite
    /// shift at once (a truck at full throttle short of the power to pull the next gear would
    /// hunt between the two).
    fn rpm_in(&self, rpm: f64, step: i32) -> f64 {
        let ratio = |g: i32| if g >= 1 { self.ratios.get(g as usize - 1).copied() } else { None };
        match (ratio(self.gear), ratio(self.gear + step)) {
            (Some(from), Some(to)) if from != 0.0 => rpm * to / from,
            _ => rpm,
        }
    }

    /// How far the fastest-spinning tyre on the ground slips beyond what grips (`SPIN_SLIP` m/s plus
    /// `SPIN_RATIO` of the speed), as a share of that allowance: 0 while the tyres grip.
    fn spin(&self, tel: &Telemetry) -> f64 {
        let allowed = SPIN_SLIP + SPIN_RATIO * tel.speed.abs();
        // (A tyre in the air does not count: its "slip" is the wheel spinning free.)
        let slip = (0..4).filter(|&k| tel.tyre_load[k] > 0.0).fold(0.0f64, |m, k| m.max(tel.tyre_slip[k]));
        ((slip - allowed) / allowed).max(0.0)
    }

    fn start_shift(&mut self, t: f64, input: &mut DriverInput) {
        self.phase = Phase::Shifting;
        self.last_shift = t;
        if self.kind == Some(GearboxKind::Manual) {
            input.clutch = 1.0;
            input.throttle = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lap`'s short cuts give `%`'s bits: inside the first lap, the second, at the laps'
    /// edges, far on, and before the trace's start.
    #[test]
    fn the_laps_short_cuts_are_the_remainder_to_the_bit() {
        let d = 1369.0_f64;
        let mut cases = vec![0.0, -0.0, 1e-300, d, 2.0 * d, 3.0 * d, -1.0, -d - 0.5, 1e9 + 0.1, f64::MIN_POSITIVE];
        for k in 0..2000 {
            cases.push(k as f64 * 1.37e-3 * d + 0.123_456_789 * k as f64);
            cases.push(d - 1e-9 * k as f64);
            cases.push(2.0 * d - 1e-9 * k as f64);
        }
        let cycle = Cycle::new("flat", vec![0.0, d], vec![0.0, 0.0]).unwrap();
        for at in cases {
            assert_eq!(lap(at, d).to_bits(), (at % d).to_bits(), "at {at}");
            assert_eq!(cycle.lap(at).to_bits(), (at % d).to_bits(), "at {at}");
        }
    }

    /// The guessed sample index is bisection's, on an even trace (the shipped UDDS), an uneven
    /// one and one of two samples, at the samples, between them, at and past the ends, NaN.
    #[test]
    fn the_guessed_sample_is_the_bisected_one() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets");
        let udds = Cycle::parse(&std::fs::read_to_string(format!("{root}/cycles/udds.csv")).unwrap(), "udds").unwrap();
        let uneven = Cycle::new("uneven", vec![0.0, 0.1, 0.15, 3.0, 3.5, 40.0, 41.0], vec![0.0; 7]).unwrap();
        let two = Cycle::new("two", vec![-2.0, 5.0], vec![1.0, 3.0]).unwrap();
        for c in [&udds, &uneven, &two] {
            let (first, last) = (c.time[0], c.duration());
            let mut ts = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, first - 1.0, last + 1.0, 1e300, -1e300];
            ts.extend(c.time.iter().flat_map(|&t| [t, t.next_down(), t.next_up()]));
            ts.extend((0..20_000).map(|k| first + (last - first) * k as f64 / 19_999.0 + 1e-7 * (k % 7) as f64));
            for t in ts {
                let expected = c.time.partition_point(|&x| x <= t);
                assert_eq!(c.after(t), expected, "{} at {t}", c.name);
            }
        }
    }

    #[test]
    fn cycles_parse_and_interpolate() {
        let c = Cycle::parse("time_s,speed_mps\n0,0\n1,2\n3,2\n", "t").unwrap();
        assert_eq!(c.speed_at(0.5), 1.0);
        assert_eq!(c.speed_at(2.0), 2.0);
        assert_eq!(c.speed_at(10.0), 2.0);
        assert!((c.distance() - 5.0).abs() < 1e-12);
        assert!(Cycle::parse("time_s,speed_mps\n0,0\n0,1\n", "t").unwrap_err().contains("t:3"));
        assert!(Cycle::parse("time_s,speed_mps\n0,-1\n1,1\n", "t").unwrap_err().contains(">= 0"));
        assert!(Cycle::parse("time_s,speed_mps\n0,x\n", "t").unwrap_err().contains("not a number"));
    }

    /// `input_at` is `input` on a copy of the telemetry with the time replaced, bit for bit and
    /// in the driver's state too: a manual 350Z through its launch and first shifts, its driver
    /// reading UDDS 37 s ahead of the vehicle's clock.
    #[test]
    fn input_at_is_input_at_another_time() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets");
        let cycle = Cycle::parse(&std::fs::read_to_string(format!("{root}/cycles/udds.csv")).unwrap(), "udds").unwrap();
        let mut v = crate::Vehicle::load(std::path::Path::new(&format!("{root}/vehicles/nissan_350z.ron"))).unwrap();
        let mut copied = Driver::new(v.spec(), DriverParams::default());
        let mut direct = copied.clone();
        for _ in 0..20_000 {
            let tel = v.telemetry();
            let at = (tel.time + 37.0) % cycle.duration();
            let mut moved = *tel;
            moved.time = at;
            let a = copied.input(&cycle, &moved, 1e-3);
            let b = direct.input_at(&cycle, at, tel, 1e-3);
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "t = {}", tel.time);
            assert_eq!(copied, direct);
            v.step(&a, 1e-3).unwrap();
        }
        assert!(v.telemetry().engaged_gear >= 2, "the drive should reach second gear");
    }
}

/// What a drive-cycle run measured (the `--summary-json` contract of `driveline run`; field
/// names are stable).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CycleSummary {
    /// Vehicle name.
    pub vehicle: String,
    /// Cycle name.
    pub cycle: String,
    /// Distance driven, km.
    pub distance_km: f64,
    /// Distance of the trace, km.
    pub cycle_distance_km: f64,
    /// Simulated time, s.
    pub duration_s: f64,
    /// Root-mean-square speed error against the trace, km/h.
    pub rms_speed_error_kmh: f64,
    /// Largest speed error, km/h.
    pub max_speed_error_kmh: f64,
    /// Completed gear shifts.
    pub shifts: u32,
    /// Engine stalls.
    pub stalls: u32,
    /// Fuel used, litres (when the engine has a fuel map).
    pub fuel_l: Option<f64>,
    /// Friction energy per element that dissipated any, kJ, in network order (a JSON object
    /// `{"element": kJ}`).
    #[serde(serialize_with = "as_map")]
    pub energy_dissipated_kj: Vec<(String, f64)>,
    /// Simulated time over wall time.
    pub realtime_factor: f64,
    /// Fixed steps taken.
    pub steps: u64,
    /// Step, s.
    pub dt: f64,
}

fn as_map<S: serde::Serializer>(v: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, x) in v {
        m.serialize_entry(k, x)?;
    }
    m.end()
}

/// Drives `vehicle` over `cycle` with `driver` at step `dt`, calling `each` after every step;
/// returns the run's figures.
pub fn drive_cycle(
    vehicle: &mut super::Vehicle,
    cycle: &Cycle,
    driver: &mut Driver,
    dt: f64,
    mut each: impl FnMut(&super::Vehicle, &DriverInput),
) -> Result<CycleSummary, crate::solver::StepError> {
    use super::VehicleEventKind;
    let wall = std::time::Instant::now();
    let n_el = vehicle.simulation().network().elements.len();
    let mut energy = vec![0.0; n_el];
    let mut last_power: Vec<f64> = (0..n_el).map(|e| vehicle.simulation().element_dissipation(e)).collect();
    let (mut sq, mut max_err, mut samples) = (0.0, 0.0f64, 0u64);
    let (mut shifts, mut stalls) = (0u32, 0u32);
    let steps = (cycle.duration() / dt).round() as u64;
    let x0 = vehicle.telemetry().distance;
    for _ in 0..steps {
        let input = driver.input(cycle, vehicle.telemetry(), dt);
        vehicle.step(&input, dt)?;
        let tel = vehicle.telemetry();
        let err = (tel.speed - cycle.speed_at(tel.time)) * 3.6;
        sq += err * err;
        max_err = max_err.max(err.abs());
        samples += 1;
        for e in vehicle.events() {
            match e.kind {
                VehicleEventKind::ShiftCompleted { .. } => shifts += 1,
                VehicleEventKind::Stalled => stalls += 1,
                _ => {}
            }
        }
        let sim = vehicle.simulation();
        for (k, (acc, last)) in energy.iter_mut().zip(last_power.iter_mut()).enumerate() {
            let p = sim.element_dissipation(k);
            *acc += 0.5 * (p + *last) * dt;
            *last = p;
        }
        each(vehicle, &input);
    }
    let tel = vehicle.telemetry();
    let net = vehicle.simulation().network();
    let wall_s = wall.elapsed().as_secs_f64().max(1e-9);
    Ok(CycleSummary {
        vehicle: vehicle.spec().name.clone(),
        cycle: cycle.name.clone(),
        distance_km: (tel.distance - x0) / 1000.0,
        cycle_distance_km: cycle.distance() / 1000.0,
        duration_s: steps as f64 * dt,
        rms_speed_error_kmh: (sq / samples.max(1) as f64).sqrt(),
        max_speed_error_kmh: max_err,
        shifts,
        stalls,
        fuel_l: vehicle.spec().engine.fuel.as_ref().map(|f| tel.fuel_used / f.density),
        energy_dissipated_kj: net
            .elements
            .iter()
            .zip(&energy)
            .filter(|(_, e)| **e > 1e-6)
            .map(|(el, e)| (el.name.clone(), e / 1000.0))
            .collect(),
        realtime_factor: steps as f64 * dt / wall_s,
        steps,
        dt,
    })
}

/// A scripted H-pattern driver for demos, benches and tests: away in first, second at 4 s,
/// third at 7 s, the clutch pedal down for each (1.2 s before the launch, 0.5 s for a shift)
/// and let up linearly (over 1.2 s, 0.4 s), `throttle` while the pedal comes up and after, none
/// while it is down. Returns the input at time `t`, s.
pub fn first_to_third(t: f64, throttle: f64) -> DriverInput {
    let (gear, at) = if t < 4.0 {
        (1, 0.0)
    } else if t < 7.0 {
        (2, 4.0)
    } else {
        (3, 7.0)
    };
    let since = t - at;
    let (down, up) = if gear == 1 { (1.2, 1.2) } else { (0.5, 0.4) };
    DriverInput {
        gear,
        clutch: if since < down { 1.0 } else { (1.0 - (since - down) / up).max(0.0) },
        throttle: if since < down { 0.0 } else { throttle },
        ..DriverInput::default()
    }
}
