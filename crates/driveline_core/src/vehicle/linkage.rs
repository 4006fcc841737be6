//! Shift linkage dynamics of one double-sided sleeve (after the Simscape Driveline Dog Clutch), with the engagement gates of
//! its dog clutches and synchronisers.
//!
//! # The law
//! Sleeve position `z` (m, 0 = neutral; `+z` engages the sleeve's first gear, `-z` its second),
//! translational mass `m`:
//!
//! ```text
//! m z'' = F_act - c z' - F_c tanh(4 z' / v_th) - F_face + F_detent(z) + F_stops(z, z')
//! F_face = mu_face |T_dog| / r_face tanh(4 v_out / v_th), only while pulling an engaged dog out
//!          (v_out > 0): a loaded dog is hard to pull out; back-cut dogs are drawn in by their
//!          load, so the faces do not resist going in.
//! F_act = clamp(k_p (z_target - z) - c_p z', -F_shift, F_shift)   (the hand or actuator)
//! ```
//!
//! Per side, with `s = +-z` the travel towards that side:
//! - `s = z_blocker` (synchromesh only): the blocker ring stops the sleeve while the speed
//!   difference across the gear exceeds the index speed; the stop's contact force is the cone's
//!   axial force, `T_cone = mu F r_c / sin(alpha)`.
//! - `s = z_gap` (dog tooth tips): the dogs drop in only if `|dw| < w_max` and, for the backlash
//!   model, a ring dog faces a hub gap; otherwise the sleeve is blocked at the tips.
//! - `s = z_gap + h` (full engagement): the end stop.
//!
//! Stops are compliant spring-dampers that only push. The sleeve is integrated with linearly
//! implicit Euler sub-steps of at most 0.1 ms (stable for any stop stiffness).
//!
//! # Coupling to the driveline
//! The linkage and the driveline exchange their state once per vehicle step: the linkage sees
//! the dog slips, angles and torques at the step's start, and hands the driveline the dogs'
//! engagement and the synchroniser cones' mean axial force over the step (the blocker's impulse
//! divided by the step). The exchange lags by one step, so its length matters: a synchroniser's
//! cone torque acts for a whole step on the slip it saw at the start, and a loaded dog resists
//! being pulled out with the torque of the last step. While a box shifts the vehicle therefore
//! steps at most [`SHIFT_SUBSTEP`](super::SHIFT_SUBSTEP) (1 ms) at a time whatever the
//! caller's step ([`VehicleControl::step`](super::VehicleControl::step)): the lag is then a
//! millisecond, against shift phases of tens to hundreds of milliseconds, and a game at 60 or
//! 30 Hz shifts as a 1 kHz run does. Stability: the sleeve's own sub-steps are implicit in its
//! stiff terms, and the cone's friction torque (its direction, and its lock at zero slip) is
//! solved in the coupled step with the other friction elements; only the cone's normal force
//! and the dogs' engagement are exchanged explicitly. That is accurate while the exchange
//! interval is short against the synchronisation (`J |dw| / T_cone`: hundreds of milliseconds
//! for the shipped boxes) and the dogs' engagement ramp (the sleeve crosses the tooth height in
//! several milliseconds), which 1 ms is.

use super::spec::{DogModel, DogSpec, LinkageSpec, SynchroSpec};
use crate::elements::wrap_pitch;

/// Largest linkage sub-step, s.
pub const MAX_SUBSTEP: f64 = 1e-4;

/// What one side of a sleeve sees from the driveline at the step start.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SideView {
    /// The side has a gear.
    pub present: bool,
    /// Speed difference across its dog (idler - output), rad/s.
    pub slip: f64,
    /// Relative angle across its dog, rad.
    pub angle: f64,
    /// Torque its dog carries, N m.
    pub torque: f64,
}

/// Discrete events of a sleeve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkageEvent {
    /// The sleeve reached the dog tips of `side` (0: +, 1: -) and was stopped there.
    Blocked(usize),
    /// The dogs of `side` dropped in (the sleeve passed the tips).
    Passed(usize),
    /// The synchroniser of `side` indexed (speeds matched) and let the sleeve pass.
    Indexed(usize),
}

/// State of one sleeve.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sleeve {
    /// Position, m.
    pub z: f64,
    /// Velocity, m/s.
    pub v: f64,
    passed: [bool; 2],
    indexed: [bool; 2],
    blocked: [bool; 2],
    /// At rest against its end stop, in gear: the target it settled for, the position and
    /// speed it settled at, and the output it gives while all three hold (the step is then a
    /// no-op).
    rest: Option<(f64, f64, f64, SleeveOutput)>,
}

/// A sleeve in gear whose speed stays below this (m/s) over a whole step, moving less than
/// [`REST_TRAVEL`], has settled against its stop: it stays there until the target changes.
const REST_SPEED: f64 = 1e-9;
/// See [`REST_SPEED`], m.
const REST_TRAVEL: f64 = 1e-12;

/// Result of one step of a sleeve.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SleeveOutput {
    /// Dog engagement per side: friction model 0..1 (capacity fraction), backlash model 0 or 1.
    pub engagement: [f64; 2],
    /// Mean synchroniser cone axial force per side over the step, N.
    pub cone_force: [f64; 2],
}

/// Parameters of a sleeve, gathered once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SleeveParams {
    /// Linkage.
    pub linkage: LinkageSpec,
    /// Dogs.
    pub dog: DogSpec,
    /// Synchroniser, if any.
    pub synchro: Option<SynchroSpec>,
    /// Largest actuator force, N.
    pub force: f64,
}

impl SleeveParams {
    /// Full-engagement travel `z_gap + h`, m.
    pub fn full(&self) -> f64 {
        self.dog.clearance + self.dog.tooth_height
    }
    fn stop_force(&self, pen: f64, vs: f64) -> (f64, bool) {
        if pen <= 0.0 {
            return (0.0, false);
        }
        let f = self.linkage.stop_stiffness * pen + self.linkage.stop_damping * vs;
        if f > 0.0 { (f, true) } else { (0.0, false) }
    }
}

impl Sleeve {
    /// True while no dog of the sleeve is in (the sleeve is short of both tips).
    pub fn is_neutral(&self, p: &SleeveParams) -> bool {
        self.z.abs() < p.dog.clearance
    }

    /// True when a step towards `target` would leave the sleeve exactly where it is whatever
    /// its dogs do: at rest in neutral with nowhere to go, or settled in gear for this target.
    pub fn at_rest_for(&self, target: f64) -> bool {
        self.resting_in_neutral(target) || self.settled_output(target).is_some()
    }

    /// In neutral, at rest, and kept there: no force acts on the sleeve at all.
    fn resting_in_neutral(&self, target: f64) -> bool {
        self.z == 0.0 && self.v == 0.0 && target == 0.0
    }

    /// The output of a sleeve settled in gear for `target`, while it stays where it settled.
    fn settled_output(&self, target: f64) -> Option<SleeveOutput> {
        self.rest.filter(|&(t, z, v, _)| t == target && z == self.z && v == self.v).map(|r| r.3)
    }

    /// At rest in neutral, or settled in gear: the sleeve does not move while its target stays.
    pub fn is_still(&self) -> bool {
        (self.z == 0.0 && self.v == 0.0) || self.rest.is_some()
    }

    /// Side held at its tips right now, if any.
    pub fn blocked_side(&self) -> Option<usize> {
        self.blocked.iter().position(|&b| b)
    }

    /// Advances the sleeve by `dt` towards `target` (m), reporting events through `event`.
    pub fn step(
        &mut self,
        p: &SleeveParams,
        target: f64,
        view: [SideView; 2],
        dt: f64,
        mut event: impl FnMut(LinkageEvent),
    ) -> SleeveOutput {
        let l = &p.linkage;
        // A sleeve resting in neutral and kept there feels no force at all (actuator, rail
        // friction, detent and stops all vanish at z = 0, v = 0): it stays exactly where it is.
        if self.resting_in_neutral(target) {
            self.passed = [false; 2];
            self.indexed = [false; 2];
            self.blocked = [false; 2];
            self.rest = None;
            return SleeveOutput::default();
        }
        // Likewise a sleeve settled in gear and kept there: the actuator holds it against the
        // stop with the dogs in, the forces balance, and what the driveline does (slip,
        // torque) only acts on a sleeve that moves (face friction) or has not passed the tips.
        if let Some(out) = self.settled_output(target) {
            return out;
        }
        self.rest = None;
        let z0 = self.z;
        let mut fired = false;
        let mut event = |e| {
            fired = true;
            event(e)
        };
        let n = (dt / MAX_SUBSTEP).ceil().max(1.0);
        let h = dt / n;
        let n = n as usize;
        // Actuator position gain: saturates 0.5 mm from the target; critically damped.
        let kp = p.force / 5e-4;
        let cp = 2.0 * (kp * l.mass).sqrt();
        let mut impulse = [0.0; 2];
        for k in 0..n {
            let t = k as f64 * h;
            let (z, v) = (self.z, self.v);
            let mut force = self.smooth_forces(p, target, &view, z, v, kp, cp);
            self.stop_forces(p, &view, (z, v), (t, h), &mut force, &mut impulse, &mut event);
            let (f, kz, kv) = force;
            let v1 = v + h * f / (l.mass - h * kv - h * h * kz);
            self.v = v1;
            self.z = z + h * v1;
        }
        // Back in neutral to within a nanometre and at rest: settle exactly (the rest state
        // above), instead of creeping towards zero for ever.
        if target == 0.0 && self.z.abs() < 1e-9 && self.v.abs() < 1e-7 {
            self.z = 0.0;
            self.v = 0.0;
        }
        let out = self.output(p, &impulse, dt);
        let toward = if target > 0.0 { 0 } else { 1 };
        if target != 0.0
            && self.passed[toward]
            && !fired
            && self.v.abs() <= REST_SPEED
            && (self.z - z0).abs() <= REST_TRAVEL
        {
            self.rest = Some((target, self.z, self.v, out));
        }
        out
    }

    /// The smooth forces on the sleeve at `(z, v)`, N: rail damping, the actuator (towards
    /// `target`, saturating at the linkage's force), rail friction, loaded dog faces resisting
    /// being pulled out, the detent around neutral. Returns `(f, df/dz, df/dv)` for the
    /// implicit sub-step.
    fn smooth_forces(
        &self,
        p: &SleeveParams,
        target: f64,
        view: &[SideView; 2],
        z: f64,
        v: f64,
        kp: f64,
        cp: f64,
    ) -> (f64, f64, f64) {
        let l = &p.linkage;
        let (mut f, mut kz, mut kv) = (0.0, 0.0, -l.damping);
        f -= l.damping * v;
        // Actuator.
        let fa = kp * (target - z) - cp * v;
        if fa.abs() > p.force {
            f += p.force * fa.signum();
        } else {
            f += fa;
            kz -= kp;
            kv -= cp;
        }
        // Coulomb friction of the rail.
        let th = (4.0 * v / l.v_threshold).tanh();
        f -= l.coulomb * th;
        kv -= l.coulomb * 4.0 / l.v_threshold * (1.0 - th * th);
        // Loaded dog faces resist being pulled out (back-cut dogs are drawn in by their load,
        // so they do not resist going in).
        for (s, side) in view.iter().enumerate() {
            let dir = if s == 0 { 1.0 } else { -1.0 };
            let out = -dir * v;
            if self.passed[s] && out > 0.0 {
                let ff = p.dog.face_friction * side.torque.abs() / p.dog.face_radius;
                let th = (4.0 * out / l.v_threshold).tanh();
                f += dir * ff * th;
                kv -= ff * 4.0 / l.v_threshold * (1.0 - th * th);
            }
        }
        // Detent around neutral.
        if z.abs() < l.detent_width {
            let a = std::f64::consts::PI * z / l.detent_width;
            f -= l.detent_force * a.sin();
            let dk = -l.detent_force * std::f64::consts::PI / l.detent_width * a.cos();
            if dk < 0.0 {
                kz += dk;
            }
        }
        (f, kz, kv)
    }

    /// The stops of both sides at `(z, v)`, a time `t` into the step (sub-step `h`): the
    /// synchroniser's blocker until the side indexes, the dog tips until they pass (aligned and
    /// slow enough), the full-travel stop. Adds their force to `force` (`(f, df/dz, df/dv)`)
    /// and the blocker's impulse to `impulse`; reports indexing, passing and blocking.
    fn stop_forces(
        &mut self,
        p: &SleeveParams,
        view: &[SideView; 2],
        (z, v): (f64, f64),
        (t, h): (f64, f64),
        force: &mut (f64, f64, f64),
        impulse: &mut [f64; 2],
        event: &mut impl FnMut(LinkageEvent),
    ) {
        let l = &p.linkage;
        let full = p.full();
        let gap = p.dog.clearance;
        let half = p.dog.backlash_deg.to_radians() / 2.0;
        let pitch = std::f64::consts::TAU / p.dog.teeth as f64;
        let (f, kz, kv) = force;
        for s in 0..2 {
            let dir = if s == 0 { 1.0 } else { -1.0 };
            let (zs, vs) = (dir * z, dir * v);
            let side = &view[s];
            if zs < gap {
                self.passed[s] = false;
            }
            if let Some(sy) = &p.synchro
                && zs < 0.5 * sy.blocker_position
            {
                self.indexed[s] = false;
            }
            let mut stop = full;
            if side.present {
                if let Some(sy) = &p.synchro
                    && !self.indexed[s]
                    && zs >= sy.blocker_position - 1e-6
                {
                    if side.slip.abs() <= sy.index_speed {
                        self.indexed[s] = true;
                        event(LinkageEvent::Indexed(s));
                    } else {
                        stop = sy.blocker_position;
                    }
                }
                if stop == full && !self.passed[s] && zs >= gap - 1e-6 {
                    let angle = side.angle + side.slip * t;
                    let aligned = p.dog.model == DogModel::Friction || wrap_pitch(angle, pitch).abs() <= half;
                    if side.slip.abs() < p.dog.max_engage_speed && aligned {
                        self.passed[s] = true;
                        self.blocked[s] = false;
                        event(LinkageEvent::Passed(s));
                    } else {
                        stop = gap;
                        if !self.blocked[s] {
                            self.blocked[s] = true;
                            event(LinkageEvent::Blocked(s));
                        }
                    }
                }
            } else {
                stop = gap; // no gear on this side: the sleeve stops at the hub
            }
            if self.blocked[s] && zs < gap - 1e-4 {
                self.blocked[s] = false;
            }
            let (fs, contact) = p.stop_force(zs - stop, vs);
            if contact {
                *f -= dir * fs;
                *kz -= l.stop_stiffness;
                *kv -= l.stop_damping;
                if p.synchro.is_some_and(|sy| stop == sy.blocker_position) {
                    impulse[s] += fs * h;
                }
            }
        }
    }

    /// The sleeve's output after a step: each side's dog engagement (0 out .. 1 full overlap)
    /// and the synchroniser cone's mean force over the step, N.
    fn output(&self, p: &SleeveParams, impulse: &[f64; 2], dt: f64) -> SleeveOutput {
        let gap = p.dog.clearance;
        let mut out = SleeveOutput::default();
        for s in 0..2 {
            let zs = if s == 0 { self.z } else { -self.z };
            let over = zs - gap - p.dog.min_overlap;
            out.engagement[s] = if !self.passed[s] || over < 0.0 {
                0.0
            } else if p.dog.model == DogModel::Backlash {
                1.0
            } else {
                (over / (p.dog.tooth_height - p.dog.min_overlap)).min(1.0)
            };
            out.cone_force[s] = impulse[s] / dt;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vehicle::spec::{DogSpec, LinkageSpec, SynchroSpec};

    fn params(model: DogModel, synchro: bool) -> SleeveParams {
        let dog = DogSpec {
            model,
            teeth: 6,
            tooth_height: 0.008,
            clearance: 0.003,
            min_overlap: 0.002,
            max_engage_speed: 10.0,
            max_torque: 5000.0,
            stiffness: 2e5,
            damping: 50.0,
            backlash_deg: 20.0,
            face_radius: 0.05,
            face_friction: 0.1,
        };
        let linkage = LinkageSpec {
            mass: 1.0,
            damping: 100.0,
            coulomb: 5.0,
            v_threshold: 0.01,
            stop_stiffness: 1e6,
            stop_damping: 1000.0,
            detent_force: 20.0,
            detent_width: 0.001,
        };
        let synchro = synchro.then_some(SynchroSpec {
            mu: 0.1,
            cone_radius: 0.035,
            cone_angle_deg: 6.5,
            blocker_position: 0.0015,
            index_speed: 0.5,
        });
        SleeveParams { linkage, dog, synchro, force: 300.0 }
    }

    /// Pushes towards side + for `seconds` with the + side seeing `view` (its angle advancing
    /// with its slip); returns the events.
    fn push(s: &mut Sleeve, p: &SleeveParams, mut view: SideView, seconds: f64) -> (Vec<LinkageEvent>, SleeveOutput) {
        let mut ev = Vec::new();
        let mut out = SleeveOutput::default();
        for _ in 0..(seconds / 1e-3) as usize {
            out = s.step(p, p.full() + 0.002, [view, SideView::default()], 1e-3, |e| ev.push(e));
            view.angle += view.slip * 1e-3;
        }
        (ev, out)
    }

    #[test]
    fn a_sleeve_settled_in_gear_rests_until_the_target_changes() {
        let p = params(DogModel::Friction, false);
        let mut s = Sleeve::default();
        let view = SideView { present: true, slip: 1.0, ..Default::default() };
        let (ev, out) = push(&mut s, &p, view, 0.5);
        assert_eq!(ev, vec![LinkageEvent::Passed(0)]);
        assert_eq!(out.engagement[0], 1.0);
        assert!(s.rest.is_some(), "not settled after 0.5 s: z {} v {}", s.z, s.v);
        // Against the stop, the actuator's force balances the stop spring: the sleeve sits
        // F / k = 0.3 mm beyond the full travel (to the 2 mm the target asks beyond it, the
        // saturated actuator pushes with its full 300 N).
        assert!((s.z - (p.full() + p.force / p.linkage.stop_stiffness)).abs() < 1e-9, "z = {}", s.z);
        // At rest the step is a no-op, whatever the driveline does.
        let rested = s;
        let busy = SideView { slip: 50.0, torque: 400.0, ..view };
        let (ev, out2) = push(&mut s, &p, busy, 0.1);
        assert!(ev.is_empty());
        assert_eq!((s, out2), (rested, out));
        // The integrated motion would not have moved it either, to the rest tolerances.
        let mut moving = Sleeve { rest: None, ..rested };
        push(&mut moving, &p, busy, 0.1);
        assert!((moving.z - rested.z).abs() < 1e-10 && moving.v.abs() < 1e-8, "{} {}", moving.z, moving.v);
        // A new target wakes it: pulled back to neutral with the dogs unloaded (loaded, their
        // face friction would hold them in), they come out.
        let unloaded = SideView { torque: 0.0, ..busy };
        for _ in 0..300 {
            s.step(&p, 0.0, [unloaded, SideView::default()], 1e-3, |_| {});
        }
        assert!(s.rest.is_none());
        assert!(s.z.abs() < p.dog.clearance, "z = {}", s.z);
    }

    #[test]
    fn dogs_block_above_the_engagement_speed_and_drop_in_below_it() {
        let p = params(DogModel::Friction, false);
        let mut s = Sleeve::default();
        let fast = SideView { present: true, slip: 20.0, ..Default::default() };
        let (ev, out) = push(&mut s, &p, fast, 0.2);
        assert_eq!(ev, vec![LinkageEvent::Blocked(0)]);
        // Held at the tips: the stop gives F / k = 0.3 mm, short of the 2 mm overlap to engage.
        assert!(s.z < p.dog.clearance + 1e-3, "z = {}", s.z);
        assert_eq!(out.engagement, [0.0, 0.0]);
        let slow = SideView { slip: 5.0, ..fast };
        let (ev, out) = push(&mut s, &p, slow, 0.2);
        assert_eq!(ev, vec![LinkageEvent::Passed(0)]);
        assert_eq!(out.engagement[0], 1.0, "fully in at the end stop");
    }

    #[test]
    fn backlash_dogs_need_a_gap_to_drop_into() {
        let p = params(DogModel::Backlash, false);
        let pitch = std::f64::consts::TAU / 6.0;
        // Not turning, a dog facing a dog (half a pitch off): blocked for good.
        let mut s = Sleeve::default();
        let facing = SideView { present: true, slip: 0.0, angle: pitch / 2.0, torque: 0.0 };
        let (ev, _) = push(&mut s, &p, facing, 0.2);
        assert_eq!(ev, vec![LinkageEvent::Blocked(0)]);
        // Turning slowly: the teeth line up within the free play (+-10 deg) and drop in.
        let turning = SideView { slip: 2.0, ..facing };
        let (ev, out) = push(&mut s, &p, turning, 0.3);
        assert_eq!(ev, vec![LinkageEvent::Passed(0)]);
        assert_eq!(out.engagement[0], 1.0);
    }

    #[test]
    fn the_blocker_holds_until_the_speeds_match_and_the_cone_gets_the_shift_force() {
        let p = params(DogModel::Friction, true);
        let mut s = Sleeve::default();
        let turning = SideView { present: true, slip: 3.0, ..Default::default() };
        let (ev, out) = push(&mut s, &p, turning, 0.3);
        assert!(ev.is_empty(), "{ev:?}");
        // At rest on the blocker the stop carries the shift force less the detent (0 out
        // there) and the static part of the rail friction (tanh(0) = 0): all of it.
        assert!((out.cone_force[0] - p.force).abs() < 1e-6 * p.force, "cone force {}", out.cone_force[0]);
        let synced = SideView { slip: 0.1, ..turning };
        let (ev, out) = push(&mut s, &p, synced, 0.2);
        assert_eq!(ev, vec![LinkageEvent::Indexed(0), LinkageEvent::Passed(0)]);
        assert_eq!(out.engagement[0], 1.0);
        assert_eq!(out.cone_force[0], 0.0);
    }
}

crate::snapshot::persist_fields!(SleeveOutput { engagement, cone_force });
crate::snapshot::persist_fields!(Sleeve { z, v, passed, indexed, blocked, rest });
