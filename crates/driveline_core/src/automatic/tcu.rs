//! The transmission controller: range selection (P, R, N, D, manual), the shift schedule, the
//! clutch-to-clutch shift sequence, lock-up and park pawl, and the per-shift report.
//!
//! # A clutch-to-clutch shift
//! Adjacent gears differ by one element: the *off-going* one opens, the *on-coming* one closes.
//! Which goes first depends on whether the input torque helps the speed change:
//!
//! - **On-coming first** (power-on upshift, coast downshift: the input speed must be pulled
//!   against its load): *fill* (the on-coming piston strokes; the off-going holds
//!   `hold_margin` times its share of the input torque), *torque phase* (the on-coming capacity
//!   ramps to its share of the input torque in the new gear while the off-going capacity ramps
//!   to zero, so the off-going is unloaded exactly when it opens: no tie-up, no flare),
//!   *inertia phase* (the on-coming slips with its static share plus the torque that brings the
//!   input inertia to the new synchronous speed in the time left, a time-to-go law; the engine
//!   torque is reduced), *end* (the on-coming has locked: pressure to full, ramped from the
//!   larger of its hold pressure and the pressure that pulled it in, so that an element just
//!   locked is never released by a hold estimate read at the lock's torque transient).
//! - **Off-going first** (power-on downshift, kickdown, coast upshift: the input torque itself
//!   moves the speed the right way): *fill*, *inertia phase* (the off-going slips, holding its
//!   share less the inertia torque of the time-to-go law, so the input runs to the new speed),
//!   *torque phase* (at synchronism the on-coming takes the load and the off-going opens),
//!   *end*.
//!
//! Element capacities are commanded as torques and turned into pressures through each
//! element's `mu cgeo` and piston ([`super::hydraulics::Piston::pressure_for`]); the element
//! torque shares per unit input torque come from the gearbox's kinematic analysis
//! ([`super::GearInfo::torque_factors`]).

use super::gearbox::{GearInfo, GearboxSpec};
use super::hydraulics::{Piston, PistonConstants};
use super::spec::{AutomaticSpec, ShiftControlSpec};
use crate::torque_map::RPM;
use std::sync::Arc;

/// Most shift elements a gearbox may have (telemetry arrays are this long).
pub const MAX_ELEMENTS: usize = 8;

/// One shift element as telemetry sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ElementTelemetry {
    /// The gearbox has this element.
    pub present: bool,
    /// Chamber pressure, Pa.
    pub pressure: f64,
    /// Normalised clamp force, [0, 1].
    pub force: f64,
    /// Torque, N m.
    pub torque: f64,
    /// Slip speed, rad/s.
    pub slip: f64,
    /// Plate temperature, deg C.
    pub temperature: f64,
    /// Stuck (locked).
    pub locked: bool,
}

/// Telemetry of every shift element of a gearbox (unused slots have `present = false`).
pub type ElementTelemetryArray = [ElementTelemetry; MAX_ELEMENTS];

/// The selector lever (or buttons) of an automatic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Selector {
    /// Park: neutral with the park pawl.
    #[default]
    Park,
    /// Reverse.
    Reverse,
    /// Neutral.
    Neutral,
    /// Drive: the schedule picks the gear.
    Drive,
    /// Manual: the driver picks the gear with shift up / shift down (paddles).
    Manual,
}

/// What the controller sees at the start of a step (all from the last step's solution).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcuInput {
    /// Time, s.
    pub time: f64,
    /// Step, s.
    pub dt: f64,
    /// Driver's accelerator pedal, [0, 1].
    pub pedal: f64,
    /// Selector position.
    pub selector: Selector,
    /// Paddle up (acted on when it turns true).
    pub up: bool,
    /// Paddle down (acted on when it turns true).
    pub down: bool,
    /// Engine speed, rad/s.
    pub w_engine: f64,
    /// Turbine (gearbox input) speed, rad/s.
    pub w_input: f64,
    /// Gearbox output speed, rad/s.
    pub w_output: f64,
    /// Static input torque estimate, N m (converter turbine torque plus what the lock-up passes).
    pub input_torque: f64,
    /// Engine torque the pedal asks for at the present engine speed (the map), N m.
    pub demand_torque: f64,
    /// Whether each element is stuck.
    pub stuck: [bool; MAX_ELEMENTS],
    /// Friction power of each element, W.
    pub power: [f64; MAX_ELEMENTS],
    /// Lock-up clutch stuck.
    pub lockup_stuck: bool,
    /// Vehicle speed, m/s.
    pub speed: f64,
    /// Vehicle acceleration, m/s^2.
    pub accel: f64,
    /// Sum of the drive torques at the wheels, N m.
    pub wheel_torque: f64,
    /// Largest tyre slip speed of a driven wheel, m/s.
    pub wheel_slip: f64,
}

/// What the controller commands for the step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcuOutput {
    /// Normalised clamp force of each shift element, [0, 1].
    pub force: [f64; MAX_ELEMENTS],
    /// Normalised lock-up clamp force, [0, 1].
    pub lockup: f64,
    /// Park pawl engaged (1) or not (0).
    pub park: f64,
    /// Engine torque reduction request, [0, 1].
    pub reduction: f64,
}

/// What the lock-up clutch is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum LockupMode {
    /// Open: the converter alone.
    #[default]
    Open,
    /// Controlled slip: the engine runs a set slip above the turbine.
    Slip,
    /// Closed: engine and turbine locked together.
    Locked,
}

/// The phase of a shift in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ShiftPhase {
    /// No shift.
    #[default]
    None,
    /// The on-coming piston strokes.
    Fill,
    /// Load moves from the off-going to the on-coming element.
    Torque,
    /// The slipping element brings the input to the new speed.
    Inertia,
    /// The on-coming element is locked; its pressure rises to full.
    End,
    /// A garage shift (from N or P into a gear): the gear's elements are applied.
    Garage,
}

/// Figures of one completed shift.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ShiftReport {
    /// Gear before (-1 reverse, 0 neutral).
    pub from: i32,
    /// Gear after.
    pub to: i32,
    /// The input torque drove (power on) at the start.
    pub power_on: bool,
    /// Fill phase, s.
    pub fill: f64,
    /// Torque phase, s.
    pub torque_phase: f64,
    /// Inertia phase, s.
    pub inertia_phase: f64,
    /// End phase, s.
    pub end_phase: f64,
    /// Whole shift, s.
    pub duration: f64,
    /// Wheel drive torque at the start, N m.
    pub output_torque_start: f64,
    /// Lowest wheel drive torque during the shift, N m (below 0 in a power-on shift = tie-up).
    pub output_torque_min: f64,
    /// Largest drop of the wheel drive torque below its start value, N m.
    pub output_torque_dip: f64,
    /// Largest wheel drive torque above both its start and its end value, N m.
    pub output_torque_overshoot: f64,
    /// Largest |jerk| of the vehicle (acceleration low-passed at 8 Hz), m/s^3.
    pub peak_jerk: f64,
    /// Largest input speed above the old gear's synchronous speed (upshift) or the new one's
    /// (downshift), rpm: flare.
    pub flare_rpm: f64,
    /// Friction energy per shift element, J.
    pub energy: [f64; MAX_ELEMENTS],
    /// Highest element temperature during the shift, deg C.
    pub peak_temperature: f64,
}

impl std::fmt::Display for ShiftReport {
    /// The shift's figures on one line in ms, N m, rpm, m/s^3 and deg C.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.fill == 0.0 && self.torque_phase == 0.0 && self.inertia_phase == 0.0 && self.end_phase == 0.0 {
            // A garage shift (from or to neutral) has no clutch-to-clutch phases.
            return write!(
                f,
                "garage shift; output torque {:.0} N m; plates up to {:.0} C",
                self.output_torque_start, self.peak_temperature
            );
        }
        write!(
            f,
            "fill {:.0} ms, torque phase {:.0} ms, inertia phase {:.0} ms, end {:.0} ms; output torque {:.0} N m, \
             dip {:.0} N m, overshoot {:.0} N m; flare {:.0} rpm; peak jerk {:.0} m/s^3; plates up to {:.0} C",
            self.fill * 1e3,
            self.torque_phase * 1e3,
            self.inertia_phase * 1e3,
            self.end_phase * 1e3,
            self.output_torque_start,
            self.output_torque_dip,
            self.output_torque_overshoot,
            self.flare_rpm,
            self.peak_jerk,
            self.peak_temperature
        )
    }
}

/// Share of the input torque element `e` carries in gear `g` of `gears` (0 if it is open there).
fn factor(gears: &[GearInfo], g: usize, e: usize) -> f64 {
    let gi = &gears[g];
    gi.closed.iter().position(|&k| k == e).map_or(0.0, |p| gi.torque_factors.get(p).map_or(0.0, |f| f.abs()))
}

/// Something the controller did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TcuEvent {
    /// A shift began.
    Started {
        /// Gear before.
        from: i32,
        /// Gear after.
        to: i32,
    },
    /// A shift completed.
    Completed(ShiftReport),
    /// The park pawl ratchets: too fast to engage.
    ParkRatchet,
    /// A manual-mode request was refused (the engine would over-rev or the gear does not exist).
    Refused {
        /// Gear asked for.
        gear: i32,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Shift {
    from: usize,
    to: usize,
    off: Option<usize>,
    on: [Option<usize>; 3],
    oncoming_first: bool,
    phase: ShiftPhase,
    phase_start: f64,
    start: f64,
    /// The figures collected so far.
    report: ShiftReport,
    /// Acceleration low-passed at 8 Hz, m/s^2 (for the jerk).
    accel_filtered: f64,
    inertia_deadline: f64,
    /// Input speed error at the start of the inertia phase, rad/s.
    dw0: f64,
    /// Off-going first: the off-going capacity at the end of the inertia phase, N m.
    off_cap: f64,
    /// The on-coming element's command when its phase handed over to the end phase, Pa: the
    /// end phase ramps to line pressure from no lower (a just-locked element released by a
    /// lower hold estimate slips again).
    end_floor: f64,
}

impl Shift {
    #[allow(clippy::too_many_arguments)]
    fn new(
        from: usize,
        to: usize,
        off: Option<usize>,
        on: [Option<usize>; 3],
        oncoming_first: bool,
        phase: ShiftPhase,
        t: f64,
        report: ShiftReport,
        accel: f64,
    ) -> Self {
        Self {
            from,
            to,
            off,
            on,
            oncoming_first,
            phase,
            phase_start: t,
            start: t,
            report,
            accel_filtered: accel,
            inertia_deadline: 0.0,
            dw0: 0.0,
            off_cap: 0.0,
            end_floor: 0.0,
        }
    }
}

/// What a controller knows of its gearbox and never changes: the gears, their numbers and the
/// pistons' constants. A vehicle's layout forms them once, and the controllers of the vehicles
/// that share the layout share them ([`crate::vehicle::AutoLayout`]).
#[derive(Debug, PartialEq)]
pub(crate) struct GearTables {
    gears: Vec<GearInfo>,
    /// Forward gear indices into `gears`, 1st first.
    forward: Vec<usize>,
    reverse: Option<usize>,
    neutral: usize,
    park_gear: usize,
    /// Each gear's number ([`Tcu::gear`]: 1.. forward, -1 reverse, 0 neutral).
    numbers: Vec<i32>,
    /// Each piston's element constants.
    piston_constants: Vec<PistonConstants>,
}

impl GearTables {
    /// The tables of gearbox `gb` (validated, resolved).
    pub(crate) fn new(gb: &GearboxSpec) -> Self {
        let mut gears = gb.analyse().expect("validated");
        let forward: Vec<usize> =
            gears.iter().enumerate().filter(|(_, g)| !g.neutral && g.ratio > 0.0).map(|(k, _)| k).collect();
        let reverse = gears.iter().position(|g| !g.neutral && g.ratio < 0.0);
        let neutral = gears.iter().position(|g| g.name == "N").or_else(|| gears.iter().position(|g| g.neutral));
        let park_gear = gears.iter().position(|g| g.name == "P");
        // A box without N or P gets an all-open neutral.
        let neutral = neutral.unwrap_or_else(|| {
            gears.push(GearInfo {
                name: "N".into(),
                closed: Vec::new(),
                ratio: 0.0,
                neutral: true,
                speeds: Vec::new(),
                torque_factors: Vec::new(),
            });
            gears.len() - 1
        });
        gears.shrink_to_fit();
        let numbers = (0..gears.len()).map(|k| gear_number(&gears[k], &forward, k)).collect();
        Self {
            numbers,
            forward,
            reverse,
            park_gear: park_gear.unwrap_or(neutral),
            neutral,
            piston_constants: gb.elements.iter().map(PistonConstants::of).collect(),
            gears,
        }
    }
}

/// The controller state.
#[derive(Debug, Clone)]
pub struct Tcu {
    /// The gearbox's tables, shared.
    fixed: Arc<GearTables>,
    pistons: Vec<Piston>,
    /// `(dt, lag, 1 - exp(-dt / lag))`: the valves' response for the last step length and lag.
    response: (f64, f64, f64),
    commands: Vec<f64>,
    temperature: Vec<f64>,
    last_power: Vec<f64>,
    /// Gear whose elements are applied (or being applied).
    current: usize,
    shift: Option<Shift>,
    last_shift_end: f64,
    /// `(dt, 1 - exp(-2 pi 8 Hz dt))`: the jerk filter's gain for the last step length.
    jerk_gain: (f64, f64),
    lockup: f64,
    lockup_on: bool,
    lockup_mode: LockupMode,
    /// Controlled-slip PI integral, N m.
    slip_integral: f64,
    last_up: bool,
    last_down: bool,
    last_pedal: f64,
    selector: Selector,
    /// A kickdown asked for and not yet started.
    kickdown: bool,
    ratchet_reported: bool,
    /// Input-side inertia with the lock-up open / closed, kg m^2.
    j_open: f64,
    j_locked: f64,
    phase: ShiftPhase,
}

fn gear_number(g: &GearInfo, forward: &[usize], idx: usize) -> i32 {
    if g.neutral {
        0
    } else if g.ratio < 0.0 {
        -1
    } else {
        forward.iter().position(|&k| k == idx).map_or(0, |p| p as i32 + 1)
    }
}

impl Tcu {
    /// Hints the buffers the controller points to toward the cache (`Vehicle::prefetch_stage`;
    /// its own bytes are hinted with what holds it). Changes nothing.
    pub(crate) fn prefetch_buffers(&self) {
        use crate::prefetch::slice;
        slice(&self.pistons);
        slice(&self.commands);
        slice(&self.temperature);
        slice(&self.last_power);
    }

    /// A controller for `spec` (validated, gearbox resolved), starting in the neutral gear with
    /// `engine_inertia` on the crankshaft.
    pub fn new(spec: &AutomaticSpec, engine_inertia: f64) -> Self {
        let gb = spec.gearbox().expect("validated: the gearbox is resolved");
        Self::with_tables(spec, engine_inertia, Arc::new(GearTables::new(gb)))
    }

    /// [`Tcu::new`] with the gearbox's tables formed already (`fixed`, of `spec`'s gearbox).
    pub(crate) fn with_tables(spec: &AutomaticSpec, engine_inertia: f64, fixed: Arc<GearTables>) -> Self {
        let gb = spec.gearbox().expect("validated: the gearbox is resolved");
        let neutral = fixed.neutral;
        let n = gb.elements.len();
        let mut pistons = vec![Piston::default(); n];
        for &k in &fixed.gears[neutral].closed {
            pistons[k] = Piston::applied(&gb.elements[k]);
        }
        let shafts = gb.shafts_resolved();
        let j_in =
            shafts.iter().find(|s| s.name == gb.input || s.members.contains(&gb.input)).map_or(0.0, |s| s.inertia);
        let j_open = spec.turbine_inertia + j_in;
        Self {
            commands: pistons.iter().map(|p| p.pressure).collect(),
            temperature: vec![spec.thermal.oil; n],
            last_power: vec![0.0; n],
            pistons,
            response: (f64::NAN, f64::NAN, 0.0),
            current: neutral,
            shift: None,
            last_shift_end: f64::NEG_INFINITY,
            jerk_gain: (f64::NAN, 0.0),
            lockup: 0.0,
            lockup_on: false,
            lockup_mode: LockupMode::Open,
            slip_integral: 0.0,
            last_up: false,
            last_down: false,
            last_pedal: 0.0,
            selector: Selector::Park,
            kickdown: false,
            ratchet_reported: false,
            j_open,
            j_locked: j_open + engine_inertia + spec.pump_inertia,
            phase: ShiftPhase::None,
            fixed,
        }
    }

    /// Gear whose elements are applied: 1.. forward, -1 reverse, 0 neutral.
    pub fn gear(&self) -> i32 {
        self.fixed.numbers[self.current]
    }
    /// Gear being shifted to, if a shift is in progress.
    pub fn target(&self) -> Option<i32> {
        // (By reference: the shift record is large.)
        self.shift.as_ref().map(|s| self.fixed.numbers[s.to])
    }
    /// Phase of the shift in progress.
    pub fn phase(&self) -> ShiftPhase {
        self.phase
    }
    /// The selector position of the last step.
    pub fn selector(&self) -> Selector {
        self.selector
    }
    /// Element temperatures, deg C.
    pub fn temperatures(&self) -> &[f64] {
        &self.temperature
    }
    /// Element chamber pressures, Pa.
    pub fn pressure(&self, k: usize) -> f64 {
        self.pistons.get(k).map_or(0.0, |p| p.pressure)
    }
    /// Lock-up command, [0, 1].
    pub fn lockup(&self) -> f64 {
        self.lockup
    }
    /// What the lock-up clutch is asked to do.
    pub fn lockup_mode(&self) -> LockupMode {
        self.lockup_mode
    }
    /// Ratio of the gear applied (0 in neutral).
    pub fn ratio(&self) -> f64 {
        self.fixed.gears[self.current].ratio
    }
    /// Number of forward gears.
    pub fn forward_gears(&self) -> usize {
        self.fixed.forward.len()
    }
    /// Ratio of forward gear `g` (1-based).
    pub fn forward_ratio(&self, g: usize) -> Option<f64> {
        self.fixed.forward.get(g.wrapping_sub(1)).map(|&k| self.fixed.gears[k].ratio)
    }

    /// The gear the selector and schedule ask for.
    fn wanted(&mut self, spec: &AutomaticSpec, inp: &TcuInput, events: &mut impl FnMut(TcuEvent)) -> usize {
        let up_edge = inp.up && !self.last_up;
        let down_edge = inp.down && !self.last_down;
        // A pedal stamp past the kickdown throttle is remembered until it can be acted on.
        let kd = spec.schedule.kickdown_throttle;
        if inp.pedal >= kd && self.last_pedal < kd {
            self.kickdown = true;
        } else if inp.pedal < kd {
            self.kickdown = false;
        }
        match inp.selector {
            Selector::Park => self.fixed.park_gear,
            Selector::Neutral => self.fixed.neutral,
            Selector::Reverse => self.fixed.reverse.unwrap_or(self.fixed.neutral),
            Selector::Drive | Selector::Manual => {
                let pos = self.fixed.forward.iter().position(|&k| k == self.current);
                let Some(p) = pos else {
                    // Coming from N, P or R: the gear that suits the speed.
                    return self.gear_for_speed(spec, inp);
                };
                // A kickdown need not wait out the time in gear, only a shift in progress.
                let settled = inp.time - self.last_shift_end >= spec.schedule.min_time_in_gear;
                if self.shift.is_some() || !(settled || self.kickdown) {
                    return self.current;
                }
                let s = &spec.schedule;
                let n_in = inp.w_output * self.fixed.gears[self.current].ratio / RPM;
                let max_rpm = s.upshift_rpm.y_range().1;
                if inp.selector == Selector::Manual {
                    // A paddle down, or the engine about to lug: one gear down.
                    let lugging = n_in < 0.8 * s.downshift_rpm.eval(0.0);
                    let want = if up_edge {
                        p + 1
                    } else if p > 0 && (down_edge || lugging) {
                        p - 1
                    } else {
                        p
                    };
                    if want >= self.fixed.forward.len() {
                        events(TcuEvent::Refused { gear: want as i32 + 1 });
                        return self.current;
                    }
                    if want < p && inp.w_output * self.fixed.gears[self.fixed.forward[want]].ratio / RPM > max_rpm {
                        events(TcuEvent::Refused { gear: want as i32 + 1 });
                        return self.current;
                    }
                    return self.fixed.forward[want];
                }
                if inp.wheel_slip > s.wheelspin_slip {
                    return self.current;
                }
                let th = inp.pedal;
                // Kickdown: a stamp past the kickdown throttle goes as low as the engine allows,
                // in one single-swap shift.
                if self.kickdown && p > 0 {
                    self.kickdown = false;
                    let mut best = p;
                    for q in (0..p).rev() {
                        let n = inp.w_output * self.fixed.gears[self.fixed.forward[q]].ratio / RPM;
                        if n < 0.85 * max_rpm && self.swap(self.current, self.fixed.forward[q]).is_some() {
                            best = q;
                        } else if n >= 0.85 * max_rpm {
                            break;
                        }
                    }
                    if best < p {
                        return self.fixed.forward[best];
                    }
                }
                if n_in > s.upshift(p + 1).eval(th) && p + 1 < self.fixed.forward.len() {
                    self.fixed.forward[p + 1]
                } else if n_in < s.downshift_rpm.eval(th) && p > 0 {
                    self.fixed.forward[p - 1]
                } else {
                    self.current
                }
            }
        }
    }

    /// Highest forward gear whose turbine speed stays above the downshift line.
    fn gear_for_speed(&self, spec: &AutomaticSpec, inp: &TcuInput) -> usize {
        let down = spec.schedule.downshift_rpm.eval(inp.pedal);
        let mut best = self.fixed.forward[0];
        for &k in &self.fixed.forward {
            if inp.w_output * self.fixed.gears[k].ratio / RPM > 1.2 * down {
                best = k;
            }
        }
        best
    }

    /// True when gears `a` and `b` close the same shift elements.
    fn same_elements(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.fixed.gears[a].closed, &self.fixed.gears[b].closed);
        a.len() == b.len() && a.iter().all(|k| b.contains(k))
    }

    /// The (off-going, on-coming) pair of a single-swap shift.
    fn swap(&self, from: usize, to: usize) -> Option<(usize, usize)> {
        let a = &self.fixed.gears[from].closed;
        let b = &self.fixed.gears[to].closed;
        let mut off = a.iter().copied().filter(|k| !b.contains(k));
        let mut on = b.iter().copied().filter(|k| !a.contains(k));
        match (off.next(), off.next(), on.next(), on.next()) {
            (Some(x), None, Some(y), None) => Some((x, y)),
            _ => None,
        }
    }

    /// One control step: selector, schedule, shift sequence, lock-up, park; then the pistons
    /// and the element heat. `events` receives what happened.
    pub fn step(&mut self, spec: &AutomaticSpec, inp: &TcuInput, mut events: impl FnMut(TcuEvent)) -> TcuOutput {
        let want = self.wanted(spec, inp, &mut events);
        self.last_up = inp.up;
        self.last_down = inp.down;
        self.last_pedal = inp.pedal;
        self.selector = inp.selector;
        // P and N close the same elements (the pawl is not a shift element): moving between
        // two such gears changes nothing in the box, so it is no shift and reports none.
        if self.shift.is_none() && want != self.current && self.same_elements(self.current, want) {
            self.current = want;
        }
        if self.shift.is_none() && want != self.current {
            self.start_shift(spec, inp, want, &mut events);
        }
        let reduction = self.shift_commands(spec, inp, &mut events);
        self.lockup_step(spec, inp);
        let park = self.park_step(spec, inp, &mut events);
        self.pistons_and_heat(spec, inp, TcuOutput { lockup: self.lockup, park, reduction, ..TcuOutput::default() })
    }

    /// Starts a shift from the current gear to `want`: a clutch-to-clutch swap when one element
    /// opens and one closes between two driving gears, else a garage shift.
    fn start_shift(&mut self, spec: &AutomaticSpec, inp: &TcuInput, want: usize, events: &mut impl FnMut(TcuEvent)) {
        let t = inp.time;
        let (from_g, to_g) = (self.fixed.numbers[self.current], self.fixed.numbers[want]);
        let both_driving = !self.fixed.gears[self.current].neutral && !self.fixed.gears[want].neutral;
        let swap = if both_driving { self.swap(self.current, want) } else { None };
        let mut report = ShiftReport {
            from: from_g,
            to: to_g,
            power_on: inp.input_torque > 0.0,
            output_torque_start: inp.wheel_torque,
            output_torque_min: inp.wheel_torque,
            ..ShiftReport::default()
        };
        report.peak_temperature = self.temperature.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let shift = if let Some((off, on)) = swap {
            // The input speed moves by dw towards the new gear (dir its sign). The input
            // torque helps when dir T_in > 0; when it cannot make the change within the
            // target inertia phase by itself (power-on upshift, coast downshift, and a coast
            // upshift against weak engine braking), the on-coming element goes first and
            // pulls the speed over.
            let dw = inp.w_output * (self.fixed.gears[want].ratio - self.fixed.gears[self.current].ratio);
            let j_in = if inp.lockup_stuck { self.j_locked } else { self.j_open };
            // With the lock-up closed the input torque is about to become the demand (a pedal
            // stamp has not reached the shafts yet); through the converter, the measurement.
            let t_in = if inp.lockup_stuck { inp.demand_torque } else { inp.input_torque };
            let helps = dw.signum() * t_in;
            let oncoming_first = helps < j_in * dw.abs() / spec.shift.inertia_phase;
            Shift::new(
                self.current,
                want,
                Some(off),
                [Some(on), None, None],
                oncoming_first,
                ShiftPhase::Fill,
                t,
                report,
                inp.accel,
            )
        } else {
            // Garage shift (or a multi-element change): release what the new gear does not
            // use, apply what it does over the garage time.
            let mut on = [None; 3];
            for (slot, k) in self.fixed.gears[want]
                .closed
                .iter()
                .filter(|k| !self.fixed.gears[self.current].closed.contains(k))
                .take(3)
                .enumerate()
            {
                on[slot] = Some(*k);
            }
            Shift::new(self.current, want, None, on, true, ShiftPhase::Garage, t, report, inp.accel)
        };
        events(TcuEvent::Started { from: from_g, to: to_g });
        self.shift = Some(shift);
    }

    /// The element pressure commands of this step: the shift in progress through its phases,
    /// or the current gear's elements at line pressure. Returns the engine torque reduction
    /// asked for.
    fn shift_commands(&mut self, spec: &AutomaticSpec, inp: &TcuInput, events: &mut impl FnMut(TcuEvent)) -> f64 {
        let gb: &GearboxSpec = spec.gearbox().expect("validated");
        let (dt, t, n) = (inp.dt, inp.time, gb.elements.len());
        let line = |k: usize| gb.elements[k].max_pressure;
        let c = spec.shift;
        // (The shift in progress is updated in place: a copy out and back costs more than the
        // rest of the bookkeeping.)
        let Some(s) = self.shift.as_mut() else {
            for k in 0..n {
                self.commands[k] = if self.fixed.gears[self.current].closed.contains(&k) { line(k) } else { 0.0 };
            }
            self.phase = ShiftPhase::None;
            return 0.0;
        };
        let gears = &self.fixed.gears;
        // Every element not involved: as in the gear shifted from (and to).
        for k in 0..n {
            let involved = s.off == Some(k) || s.on.contains(&Some(k));
            if !involved {
                self.commands[k] = if gears[s.to].closed.contains(&k) { line(k) } else { 0.0 };
            }
        }
        let p = PhaseInputs {
            gb,
            gears,
            pistons: &self.pistons,
            c,
            inp,
            t,
            elapsed: t - s.phase_start,
            t_s: inp.input_torque.abs(),
            j_in: if inp.lockup_stuck { self.j_locked } else { self.j_open },
            // The synchronous input speed of the gear shifted to.
            w_target: inp.w_output * gears[s.to].ratio,
        };
        let cmd = &mut self.commands;
        let (mut done, reduction) = match s.phase {
            ShiftPhase::Garage => (garage_phase(s, cmd, &p), 0.0),
            ShiftPhase::Fill => {
                fill_phase(s, cmd, &p);
                (false, 0.0)
            }
            ShiftPhase::Torque => {
                torque_phase(s, cmd, &p);
                (false, 0.0)
            }
            ShiftPhase::Inertia => (false, inertia_phase(s, cmd, &p)),
            ShiftPhase::End => end_phase(s, cmd, &p),
            ShiftPhase::None => (false, 0.0),
        };
        s.record(&p, &self.temperature, &self.last_power, &mut self.jerk_gain);
        if s.phase == ShiftPhase::Fill && t - s.start > c.timeout {
            done = true;
        }
        if done {
            let r = &mut s.report;
            r.duration = t + dt - s.start;
            // Overshoot above the end value, too: the larger of start and end is the base.
            r.output_torque_overshoot = (r.output_torque_overshoot + r.output_torque_start
                - inp.wheel_torque.max(r.output_torque_start))
            .max(0.0);
            let report = *r;
            self.current = s.to;
            self.shift = None;
            self.last_shift_end = t + dt;
            for k in 0..n {
                self.commands[k] = if self.fixed.gears[self.current].closed.contains(&k) { line(k) } else { 0.0 };
            }
            events(TcuEvent::Completed(report));
            self.phase = ShiftPhase::None;
        } else {
            self.phase = s.phase;
        }
        reduction
    }

    /// Lock-up: closes in D/M from `min_gear` above `on_rpm`, opens below `off_rpm`, in
    /// neutral and during garage shifts; ramps over `apply_time`.
    fn lockup_step(&mut self, spec: &AutomaticSpec, inp: &TcuInput) {
        let dt = inp.dt;
        let l = &spec.lockup;
        let gear = self.gear();
        let n_in = inp.w_input / RPM;
        let driving = matches!(inp.selector, Selector::Drive | Selector::Manual) && gear >= l.min_gear as i32;
        if !driving || n_in < l.off_rpm || self.phase == ShiftPhase::Garage {
            self.lockup_on = false;
        } else if n_in > l.on_rpm && self.shift.is_none() {
            self.lockup_on = true;
        }
        let rate = dt / l.apply_time;
        let slip = inp.w_engine - inp.w_input;
        let target = if !self.lockup_on {
            self.slip_integral = 0.0;
            self.lockup_mode = LockupMode::Open;
            0.0
        } else if l.slip_rpm > 0.0 && n_in < l.lock_rpm {
            // Controlled slip: the capacity carries the engine's demand torque, trimmed by a PI
            // loop on the slip error (damps the driveline like a soft coupling, at a small loss).
            self.lockup_mode = LockupMode::Slip;
            let cap_max = (l.mu.eval(0.0) * l.cgeo() * l.max_force).max(1e-9);
            let e = slip - l.slip_rpm * RPM;
            let (kp, ki) = (l.slip_gain, l.slip_gain * 5.0);
            self.slip_integral = (self.slip_integral + ki * e * dt).clamp(-cap_max, cap_max);
            ((inp.demand_torque.max(0.0) + kp * e + self.slip_integral) / cap_max).clamp(0.0, 1.0)
        } else {
            self.lockup_mode = LockupMode::Locked;
            1.0
        };
        // Applies no faster than `apply_time` from open to full; releases four times as fast.
        self.lockup = if target > self.lockup {
            (self.lockup + rate).min(target)
        } else {
            (self.lockup - 4.0 * rate).max(target)
        };
    }

    /// The park pawl's engagement (0 or 1): engages in P at or below the pawl's speed, else
    /// ratchets (reported once).
    fn park_step(&mut self, spec: &AutomaticSpec, inp: &TcuInput, events: &mut impl FnMut(TcuEvent)) -> f64 {
        let mut park = 0.0;
        if inp.selector == Selector::Park {
            if inp.speed.abs() * 3.6 <= spec.park.max_engage_kmh {
                park = 1.0;
                self.ratchet_reported = false;
            } else if !self.ratchet_reported {
                self.ratchet_reported = true;
                events(TcuEvent::ParkRatchet);
            }
        }
        park
    }

    /// Steps the pistons towards their commands and the elements' temperatures with their
    /// friction power; fills `out.force`.
    fn pistons_and_heat(&mut self, spec: &AutomaticSpec, inp: &TcuInput, mut out: TcuOutput) -> TcuOutput {
        let dt = inp.dt;
        let n = spec.gearbox().expect("validated").elements.len();
        let c = spec.shift;
        let th = spec.thermal;
        if (self.response.0, self.response.1) != (dt, c.pressure_lag) {
            self.response = (dt, c.pressure_lag, Piston::response(c.pressure_lag, dt));
        }
        let response = self.response.2;
        for k in 0..n.min(MAX_ELEMENTS) {
            out.force[k] = self.pistons[k].step_with(&self.fixed.piston_constants[k], self.commands[k], response, dt);
            let p = 0.5 * (inp.power[k] + self.last_power[k]);
            self.last_power[k] = inp.power[k];
            // Implicit in the cooling term: stable at any step.
            self.temperature[k] = (self.temperature[k] + dt / th.heat_capacity * (p + th.cooling * th.oil))
                / (1.0 + dt * th.cooling / th.heat_capacity);
        }
        out
    }
}

/// What the phases of a shift read in one control step.
struct PhaseInputs<'a> {
    gb: &'a GearboxSpec,
    gears: &'a [GearInfo],
    pistons: &'a [Piston],
    c: ShiftControlSpec,
    inp: &'a TcuInput,
    /// Time, s, and time since the phase began, s.
    t: f64,
    elapsed: f64,
    /// Magnitude of the input torque, N m.
    t_s: f64,
    /// Inertia at the gearbox input (with the lock-up closed or open), kg m^2.
    j_in: f64,
    /// The synchronous input speed of the gear shifted to, rad/s.
    w_target: f64,
}

impl PhaseInputs<'_> {
    /// Element `k`'s line pressure, Pa.
    fn line(&self, k: usize) -> f64 {
        self.gb.elements[k].max_pressure
    }

    /// The capacity that holds element `e`'s share of the input torque in gear `g`, with the
    /// hold margin, N m.
    fn hold(&self, g: usize, e: usize) -> f64 {
        self.c.hold_margin * factor(self.gears, g, e) * self.t_s
    }
}

/// Garage shift: the on-coming elements filled, then ramped to line pressure over the garage
/// time. Returns whether the shift is done.
fn garage_phase(s: &mut Shift, cmd: &mut [f64], p: &PhaseInputs) -> bool {
    let mut done = false;
    let ramp = (p.elapsed / p.c.garage_time).min(1.0);
    for k in s.on.iter().flatten() {
        let e = &p.gb.elements[*k];
        let kiss = Piston::kiss_pressure(e);
        cmd[*k] = if p.pistons[*k].fill < 1.0 { kiss * 1.05 } else { kiss + ramp * ramp * (e.max_pressure - kiss) };
    }
    let all_in = s.on.iter().flatten().all(|k| p.pistons[*k].fill >= 1.0);
    if (all_in && ramp >= 1.0) || p.elapsed > p.c.timeout {
        done = true;
    }
    done
}

/// Fill: the on-coming piston strokes to its kiss point while the off-going holds the load.
fn fill_phase(s: &mut Shift, cmd: &mut [f64], p: &PhaseInputs) {
    let (off, on) = (s.off.unwrap_or(0), s.on[0].unwrap_or(0));
    let e = &p.gb.elements[on];
    cmd[on] = Piston::kiss_pressure(e) * 1.05;
    let floor = 0.05 * p.gb.elements[off].capacity();
    cmd[off] = Piston::pressure_for(&p.gb.elements[off], p.hold(s.from, off).max(floor));
    if p.pistons[on].fill >= 1.0 {
        s.report.fill = p.elapsed;
        s.phase = if s.oncoming_first { ShiftPhase::Torque } else { ShiftPhase::Inertia };
        s.phase_start = p.t;
        s.inertia_deadline = p.t + p.c.inertia_phase;
        s.dw0 = (p.inp.w_input - p.w_target).abs();
    }
}

/// Torque phase: the load handed from the off-going element to the on-coming one.
fn torque_phase(s: &mut Shift, cmd: &mut [f64], p: &PhaseInputs) {
    let (off, on) = (s.off.unwrap_or(0), s.on[0].unwrap_or(0));
    let x = (p.elapsed / p.c.torque_phase).min(1.0);
    // On-coming first: the handover at constant speeds, matched so that the
    // off-going is unloaded as it opens. Off-going first: the input is still
    // running to the new speed; the on-coming takes the load with margin (it
    // pulls the same way, then holds at synchronism) as the off-going lets go.
    let (on_cap, off_cap) = if s.oncoming_first {
        (x * factor(p.gears, s.to, on) * p.t_s, (1.0 - x) * p.hold(s.from, off))
    } else {
        (x * p.hold(s.to, on), (1.0 - x) * s.off_cap)
    };
    cmd[on] = Piston::pressure_for(&p.gb.elements[on], on_cap).max(Piston::kiss_pressure(&p.gb.elements[on]) * 1.05);
    cmd[off] = if x >= 1.0 { 0.0 } else { Piston::pressure_for(&p.gb.elements[off], off_cap) };
    if x >= 1.0 {
        s.report.torque_phase = p.elapsed;
        if s.oncoming_first {
            s.phase = ShiftPhase::Inertia;
            s.inertia_deadline = p.t + p.c.inertia_phase;
            s.dw0 = (p.inp.w_input - p.w_target).abs();
        } else {
            s.end_floor = cmd[on];
            s.phase = ShiftPhase::End;
        }
        s.phase_start = p.t;
    }
}

/// Inertia phase: the input speed brought to the new gear's, pulled by the on-coming element
/// or held back by the off-going one. Returns the engine torque reduction asked for.
fn inertia_phase(s: &mut Shift, cmd: &mut [f64], p: &PhaseInputs) -> f64 {
    let mut reduction = 0.0;
    let (off, on) = (s.off.unwrap_or(0), s.on[0].unwrap_or(0));
    // Inertia torque that brings the input to the new speed in the time left; at
    // least half the mean rate of the whole phase, so it arrives in finite time.
    let dw = (p.inp.w_input - p.w_target).abs();
    let to_go = (s.inertia_deadline - p.t).max(0.02);
    let rate = (dw / to_go).max(0.5 * s.dw0 / p.c.inertia_phase);
    let j_torque = p.j_in * rate;
    // Input torque in the direction the speed must move (measured: it already
    // carries the effect of any torque reduction).
    let dir = (p.w_target - p.inp.w_input).signum();
    let helping = dir * p.inp.input_torque;
    if s.oncoming_first {
        if s.report.power_on {
            reduction = p.c.torque_reduction;
        }
        // The on-coming element pulls: J a = T_in + dir C / f.
        let cap = factor(p.gears, s.to, on) * (j_torque - helping).max(0.0);
        let pull = Piston::pressure_for(&p.gb.elements[on], cap);
        cmd[off] = 0.0;
        if p.inp.stuck[on] || p.elapsed > p.c.timeout {
            // Locked (or out of time): hold at least the pressure that pulled
            // it in; the end phase ramps up from there.
            cmd[on] = pull.max(cmd[on]);
            s.end_floor = cmd[on];
            s.report.inertia_phase = p.elapsed;
            s.phase = ShiftPhase::End;
            s.phase_start = p.t;
        } else {
            cmd[on] = pull;
        }
    } else {
        // The off-going element holds back: J a = T_in - dir C / f.
        let cap = factor(p.gears, s.from, off) * (helping - j_torque).max(0.0);
        s.off_cap = cap;
        cmd[off] = Piston::pressure_for(&p.gb.elements[off], cap);
        cmd[on] = Piston::kiss_pressure(&p.gb.elements[on]) * 1.05;
        // The last quarter of the way: hand over while the speed still closes in,
        // so the on-coming holds it at synchronism instead of letting it flare.
        if dw < 0.25 * s.dw0 || p.inp.stuck[on] || p.elapsed > p.c.timeout {
            s.report.inertia_phase = p.elapsed;
            s.phase = ShiftPhase::Torque;
            s.phase_start = p.t;
        }
    }
    reduction
}

/// End phase: the on-coming element ramped to line pressure. Returns whether the shift is done
/// and the engine torque reduction asked for.
fn end_phase(s: &mut Shift, cmd: &mut [f64], p: &PhaseInputs) -> (bool, f64) {
    let (mut done, mut reduction) = (false, 0.0);
    let on = s.on[0].unwrap_or(0);
    let x = (p.elapsed / p.c.end_phase).min(1.0);
    let hold = Piston::pressure_for(&p.gb.elements[on], factor(p.gears, s.to, on) * p.t_s * p.c.hold_margin);
    let base = hold.max(s.end_floor);
    cmd[on] = base + x * (p.line(on) - base);
    if let Some(off) = s.off {
        cmd[off] = 0.0;
    }
    if s.report.power_on && s.oncoming_first {
        reduction = p.c.torque_reduction * (1.0 - x);
    }
    if x >= 1.0 {
        s.report.end_phase = p.elapsed;
        done = true;
    }
    (done, reduction)
}

impl Shift {
    /// Collects the shift report's figures of this step: flare, torque dip and overshoot, jerk
    /// (of the acceleration low-passed at 8 Hz, with the filter's gain for the step kept in
    /// `jerk_gain` as `(dt, gain)`), element energies and peak temperature.
    fn record(&mut self, p: &PhaseInputs, temperature: &[f64], last_power: &[f64], jerk_gain: &mut (f64, f64)) {
        let (inp, gears, dt) = (p.inp, p.gears, p.inp.dt);
        let n = p.gb.elements.len();
        let s = self;
        let w_old = inp.w_output * gears[s.from].ratio;
        let upshift = gears[s.to].ratio.abs() < gears[s.from].ratio.abs();
        let sync = if upshift { w_old } else { p.w_target };
        let r = &mut s.report;
        if s.off.is_some() {
            r.flare_rpm = r.flare_rpm.max((inp.w_input - sync) * inp.w_input.signum() / RPM);
        }
        r.output_torque_min = r.output_torque_min.min(inp.wheel_torque);
        r.output_torque_dip = r.output_torque_dip.max(r.output_torque_start - inp.wheel_torque);
        r.output_torque_overshoot = r.output_torque_overshoot.max(inp.wheel_torque - r.output_torque_start);
        // Jerk of the acceleration low-passed at 8 Hz (the ride-comfort band; the raw
        // per-step difference is dominated by tyre and shaft ringing).
        if dt > 0.0 {
            if jerk_gain.0 != dt {
                *jerk_gain = (dt, 1.0 - (-dt * 2.0 * std::f64::consts::PI * 8.0).exp());
            }
            let a = jerk_gain.1;
            let filtered = s.accel_filtered + a * (inp.accel - s.accel_filtered);
            r.peak_jerk = r.peak_jerk.max(((filtered - s.accel_filtered) / dt).abs());
            s.accel_filtered = filtered;
        }
        for k in 0..n.min(MAX_ELEMENTS) {
            r.energy[k] += 0.5 * (inp.power[k] + last_power[k]) * dt;
        }
        r.peak_temperature = r.peak_temperature.max(temperature.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    }
}

crate::snapshot::persist_enum!(Selector { Park, Reverse, Neutral, Drive, Manual });
crate::snapshot::persist_enum!(LockupMode { Open, Slip, Locked });
crate::snapshot::persist_enum!(ShiftPhase { None, Fill, Torque, Inertia, End, Garage });
crate::snapshot::persist_fields!(ElementTelemetry { present, pressure, force, torque, slip, temperature, locked });
crate::snapshot::persist_fields!(ShiftReport {
    from,
    to,
    power_on,
    fill,
    torque_phase,
    inertia_phase,
    end_phase,
    duration,
    output_torque_start,
    output_torque_min,
    output_torque_dip,
    output_torque_overshoot,
    peak_jerk,
    flare_rpm,
    energy,
    peak_temperature,
});
crate::snapshot::persist_fields!(Shift {
    from,
    to,
    off,
    on,
    oncoming_first,
    phase,
    phase_start,
    start,
    report,
    accel_filtered,
    inertia_deadline,
    dw0,
    off_cap,
    end_floor,
});
crate::snapshot::persist_fields!(TcuOutput { force, lockup, park, reduction });
// The gears, element maps and piston constants follow from the description.
crate::snapshot::persist_fields!(Tcu {
    pistons,
    response,
    commands,
    temperature,
    last_power,
    current,
    shift,
    last_shift_end,
    jerk_gain,
    lockup,
    lockup_on,
    lockup_mode,
    slip_integral,
    last_up,
    last_down,
    last_pedal,
    selector,
    kickdown,
    ratchet_reported,
    phase,
});
