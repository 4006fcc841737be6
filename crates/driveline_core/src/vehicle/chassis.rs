//! A game's rigid-body chassis under the driveline ([`Road::Chassis`]): what the game writes
//! for each wheel before a step ([`WheelContact`]), what it reads back ([`WheelForces`]) and
//! how the two steps are coupled.
//!
//! # The coupling scheme
//! The chassis (a rigid body in avian, rapier or the game's own integrator) and the driveline
//! are stepped one after the other. In the driveline the chassis is a **mass** (`chassis`, the
//! body's `mass`) moving along the wheels' headings; each tyre runs on its **contact point**
//! (`ground_<wheel>`), which moves relative to that mass at a speed held over the step (what
//! the chassis' yaw and pitch give that corner). Each physics step:
//!
//! 1. The game writes each wheel's [`WheelContact`]: the contact patch's velocity along and
//!    across the wheel's heading, the normal load from its suspension, the surface friction,
//!    and the acceleration everything but the tyres gives the chassis at that wheel (gravity's
//!    component along the heading, at least).
//! 2. The driveline steps, once at the physics step or many times at its own rate (1 kHz)
//!    inside it. Over the whole physics step it holds the contact constant: the loads, the
//!    friction, the slip angles, each contact point's speed relative to the chassis mass
//!    (`v_k - V`, with `V = sum m_k v_k / m` the mass-weighted mean of the written speeds and
//!    `m_k` each wheel's share of the mass, half its axle's), and the force on the chassis
//!    mass, `sum m_k a_along,k + m (V - V_driveline) / T`, `T` the time between the game's two
//!    last writes (the physics step). The second term brings the driveline's chassis to the
//!    game's speed over the step (dead-beat; zero when the two agree, as they do once the game
//!    applies the forces below).
//! 3. The game reads each wheel's [`WheelForces`] and applies them at the contact point:
//!    `longitudinal` along the heading, `lateral` across it. The four `longitudinal` forces
//!    are the tyres' mean forces since the write: their sum is the chassis mass's momentum
//!    change less the held force's impulse, exactly, so the game's chassis changes its speed as
//!    the driveline's did; each wheel's share is its tyre's own force sampled at the ends of
//!    the (sub-)steps, the remainder (a tyre that slid and locked within a step) given to the
//!    tyres in proportion to the grip each has left, so none exceeds its grip.
//!
//! **Why it is stable at any step, and holds without creep.** The tyres, the brakes, the
//! wheels and the whole driveline meet the chassis' inertia inside the coupled stick-slip
//! solve: a braked car stops in the step it stops (the chassis mass comes to rest, the tyres
//! and the brakes lock), and a car parked on a slope keeps its tyres and brakes locked with the
//! force the slope asks for (`-sum m_k a_along,k`), exactly, whichever wheels are braked, so
//! the game's chassis sees its tyres cancel gravity to rounding. There is no explicit spring or
//! damper between the two integrators, so no step-size limit from the coupling; what is
//! explicit is the chassis' rotation (yaw, pitch, the load transfer through the suspension),
//! which the game's step carries and the next write corrects. (Tested at 60 Hz, with the
//! driveline at the physics step and at 16 sub-steps inside it: `tests/chassis_coupling.rs`.)
//!
//! **Lateral force.** The tyre's lateral force does not enter the driveline; it is formed from
//! the written contact with the combined-slip Magic Formula ([`crate::tyre::CombinedSlip`]) and
//! the same contact mass, linearly implicit so that it cannot overshoot at low speed:
//!
//! ```text
//! c = mu F_z G_yk B_y C_y D_y / max(|v_x|, v_low)              (N s/m, the linear region)
//! F_impl = -c (v_y + T a_across) / (1 + c T / m_k)              (backward Euler with m_k)
//! F_stick = -m_s v_y / T - m_k a_across - m_k y / (4 T^2)         (y: the patch's sideways travel since it stuck)
//! F_y = (1 - w) clamp(F_stick, +-cap) + w clamp(F_impl, +-|F_y0(alpha)|),  w = min(|v_x| / v_low, 1)
//! ```
//!
//! `cap = mu F_z G_yk D_y` is the lateral peak. At rest the tyre holds laterally like it holds
//! longitudinally (within the peak, no creep: the `a_across` term is exact); moving, it follows
//! the Magic Formula, and never more than the force that would bring the lateral slip to zero
//! within the step. The stick's slip term uses `m_s`, less than the wheel's mass share: a
//! lateral force at the ground also rolls and yaws the chassis, so a contact point presents
//! less mass than its share (about 60 % of it in a car's roll, less for a tall truck), and a
//! full-mass correction overshoots and, with the suspension, can grow into a roll-yaw
//! oscillation (seen at 60 Hz on a slope). With the contact's effective mass written
//! ([`WheelContact::mass_across`]), `m_s = 0.8 m_k mass_across / m` ([`STICK_SHARE`] of
//! dead-beat on that mass); without it `m_s = m_k / 2`, which suits a car (a 12 t truck on a
//! car's suspension geometry rang with it). The last term is the tread holding the patch where
//! it stuck (reset when the tyre slides or rolls faster than `v_low`): without it the stick is
//! a stiff damper, and a steady side load that `a_across` does not carry (the yaw moment of a
//! parked car's free front wheels' rolling resistance) makes the car creep.
//!
//! **Combined slip.** The longitudinal peak in the driveline is the load times the surface
//! friction times `G_xa(alpha, kappa)`, with `alpha` from the write and `kappa` from the end
//! of the previous step; the lateral force is weighted by `G_yk(kappa, alpha)`. A rolling
//! tyre's `kappa` is the slip the Magic Formula's rising branch gives its force
//! ([`crate::tyre::rising_slip`]); a sliding tyre's is the slide's.

use super::set;
use super::*;
use crate::snapshot::persist_fields;
use crate::tyre::{CombinedSlip, rising_slip};

/// Low-speed floor of the slip angle's denominator, m/s (as the longitudinal tyre's `v_low`).
pub const V_LOW: f64 = 1.0;

/// What a game's chassis tells the driveline about one wheel before a step
/// ([`Vehicle::set_chassis_contact`], or the Bevy plugin's `WheelContact` component).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WheelContact {
    /// Whether the tyre touches the ground. `false` is a wheel in the air: no load, no force.
    pub in_contact: bool,
    /// Normal load, N (>= 0; a negative value is taken as 0).
    pub load: f64,
    /// Velocity of the chassis at the contact point over the ground, along the wheel's
    /// heading (forward positive), m/s.
    pub speed_along: f64,
    /// The same across the wheel's heading (to the wheel's left positive), m/s.
    pub speed_across: f64,
    /// Surface friction relative to the tyre's own (1 dry road as the tyre is tuned, 0.1 ice),
    /// in [0, 10].
    pub friction: f64,
    /// Acceleration of the chassis at this wheel along its heading from everything but the
    /// tyres (gravity's component along the heading, `g . heading`; drag if the game wants the
    /// driveline to know it), m/s^2.
    pub accel_along: f64,
    /// The same across the heading (gravity's component across on a side slope), m/s^2.
    pub accel_across: f64,
    /// The chassis' effective mass at the contact point across the heading, kg: the mass a
    /// sideways impulse there meets once the body's roll and yaw are counted,
    /// `1 / (1/m + (r x l) . I^-1 (r x l))` with `r` from the centre of mass to the contact
    /// point, `l` the unit vector across the heading and `I` the body's inertia tensor. The
    /// tyre's lateral stick at rest scales with it (see the module docs). 0, the default: not
    /// known, half the body's mass is taken (about right for a car; a tall or narrow body
    /// presents less, and its stick can then ring).
    #[serde(default)]
    pub mass_across: f64,
}

impl Default for WheelContact {
    fn default() -> Self {
        Self {
            in_contact: true,
            load: 0.0,
            speed_along: 0.0,
            speed_across: 0.0,
            friction: 1.0,
            accel_along: 0.0,
            accel_across: 0.0,
            mass_across: 0.0,
        }
    }
}

/// What the driveline tells a game's chassis about one wheel after a step
/// ([`Vehicle::wheel_forces`], or the Bevy plugin's `WheelForces` component). Forces are
/// those on the chassis at the contact point.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WheelForces {
    /// Tyre force along the wheel's heading, forward positive, N: the mean since the contact
    /// was last written (apply it over the physics step).
    pub longitudinal: f64,
    /// Tyre force across the wheel's heading, to its left positive, N.
    pub lateral: f64,
    /// The wheel's spin, rad/s.
    pub spin: f64,
    /// Slip ratio `kappa` (signed: positive when the tyre's rim runs faster than the ground).
    pub slip_ratio: f64,
    /// Slip angle `alpha`, rad: `atan(v_across / max(|v_along|, 1 m/s))`.
    pub slip_angle: f64,
    /// The contact mass's speed at the end of the step, m/s: what the driveline took the
    /// chassis' speed along the heading to be.
    pub contact_speed: f64,
}

/// One wheel's coupling state: the contact as written, what the tyre did since.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ChassisWheel {
    pub(crate) contact: WheelContact,
    /// The tyre's force times the (sub-)steps since the write, N s.
    tyre_impulse: f64,
    /// The slip ratio at the end of the last step.
    kappa: f64,
    /// How far the contact patch has moved sideways since the tyre last held it at rest, m.
    anchor: f64,
    pub(crate) forces: WheelForces,
}

/// The coupling's state: the four wheels and what is held on the chassis since the write.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ChassisState {
    pub(crate) wheels: [ChassisWheel; 4],
    /// Written since the last step: the held force is to be formed at the next.
    fresh: bool,
    /// The force held on the chassis since the write, N, its servo part, N, and for how long
    /// the servo lasts (the physics step), s.
    force: f64,
    servo: f64,
    horizon: f64,
    /// Since the write: time, the chassis' speed at the write, the held force's impulse.
    elapsed: f64,
    v_start: f64,
    impulse: f64,
}

persist_fields!(WheelContact {
    in_contact,
    load,
    speed_along,
    speed_across,
    friction,
    accel_along,
    accel_across,
    mass_across
});
persist_fields!(WheelForces { longitudinal, lateral, spin, slip_ratio, slip_angle, contact_speed });
persist_fields!(ChassisWheel { contact, tyre_impulse, kappa, anchor, forces });
persist_fields!(ChassisState { wheels, fresh, force, servo, horizon, elapsed, v_start, impulse });

/// The elements and inputs of [`Road::Chassis`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChassisIds {
    /// The chassis mass and its force input.
    pub(crate) chassis: usize,
    pub(crate) force_in: InputId,
    /// Each contact point's speed relative to the chassis.
    pub(crate) speed_in: [InputId; 4],
    /// Each wheel's share of the mass, and the whole, kg.
    pub(crate) mass: [f64; 4],
    pub(crate) total: f64,
    /// The longitudinal tyre's peak slip ratio.
    pub(crate) kappa_peak: f64,
}

/// A field of a [`WheelContact`] that was not finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("wheel contact `{field}` is not finite; the last valid value is kept")]
pub struct ContactRejected {
    /// The field's name.
    pub field: &'static str,
}

impl ChassisWheel {
    /// The slip angle of the written contact, rad.
    fn alpha(&self) -> f64 {
        (self.contact.speed_across / self.contact.speed_along.abs().max(V_LOW)).atan()
    }

    /// The normal load times the surface friction, N: what the tyre's force scales with.
    fn grip_load(&self) -> f64 {
        if self.contact.in_contact { self.contact.load * self.contact.friction } else { 0.0 }
    }
}

impl ChassisState {
    /// Takes a game's write for wheel `k`: finite values are taken (the load clamped to >= 0,
    /// the friction to [0, 10]), a non-finite one keeps the last valid value and is named in
    /// the error.
    pub(crate) fn write(&mut self, k: usize, c: &WheelContact) -> Result<(), ContactRejected> {
        let mut rejected = None;
        let mut take = |field: &'static str, v: f64, to: &mut f64| {
            if v.is_finite() {
                *to = v;
            } else if rejected.is_none() {
                rejected = Some(field);
            }
        };
        let w = &mut self.wheels[k].contact;
        w.in_contact = c.in_contact;
        take("load", c.load, &mut w.load);
        take("speed_along", c.speed_along, &mut w.speed_along);
        take("speed_across", c.speed_across, &mut w.speed_across);
        take("friction", c.friction, &mut w.friction);
        take("accel_along", c.accel_along, &mut w.accel_along);
        take("accel_across", c.accel_across, &mut w.accel_across);
        take("mass_across", c.mass_across, &mut w.mass_across);
        w.load = w.load.max(0.0);
        w.mass_across = w.mass_across.max(0.0);
        w.friction = w.friction.clamp(0.0, 10.0);
        if !self.fresh && self.elapsed > 0.0 {
            // The first write after steps: they were the physics step.
            self.horizon = self.elapsed;
        }
        self.fresh = true;
        rejected.map_or(Ok(()), |field| Err(ContactRejected { field }))
    }

    /// Sets every contact moving at `speed` along its heading, as a teleport does.
    pub(crate) fn set_speed(&mut self, speed: f64) {
        for w in &mut self.wheels {
            w.contact.speed_along = speed;
            w.contact.speed_across = 0.0;
        }
        self.fresh = true;
    }

    /// Before a (sub-)step of `h` seconds: the force on the chassis (formed at the first step
    /// after a write) and each contact point's speed relative to it.
    pub(crate) fn actuate(&mut self, sim: &mut Simulation, c: &ChassisIds, h: f64) {
        let v_now = sim.body_state(c.chassis).map_or(0.0, |s| s.1);
        if self.fresh {
            self.fresh = false;
            let v_game = (0..4).map(|k| c.mass[k] * self.wheels[k].contact.speed_along).sum::<f64>() / c.total;
            let t = if self.horizon > 0.0 { self.horizon } else { h };
            self.servo = c.total * (v_game - v_now) / t;
            self.horizon = t;
            self.elapsed = 0.0;
            self.impulse = 0.0;
            self.v_start = v_now;
            for k in 0..4 {
                self.wheels[k].tyre_impulse = 0.0;
                set(sim, c.speed_in[k], self.wheels[k].contact.speed_along - v_game);
            }
        }
        // The servo lasts the physics step; if the game stops writing, only the held
        // accelerations stay.
        let servo = if self.elapsed < self.horizon * (1.0 - 1e-9) { self.servo } else { 0.0 };
        self.force = (0..4).map(|k| c.mass[k] * self.wheels[k].contact.accel_along).sum::<f64>() + servo;
        set(sim, c.force_in, self.force);
    }

    /// Each tyre's longitudinal load input: load, friction and the combined-slip weight.
    pub(crate) fn tyre_load(&self, k: usize, combined: &CombinedSlip) -> f64 {
        let w = &self.wheels[k];
        w.grip_load() * combined.longitudinal_weight(w.alpha(), w.kappa)
    }

    /// After a (sub-)step of `h` seconds: each wheel's mean longitudinal force since the write,
    /// its slip ratio and its lateral force.
    pub(crate) fn after_step(
        &mut self,
        sim: &Simulation,
        c: &ChassisIds,
        tyres: &TyreIds,
        combined: &CombinedSlip,
        h: f64,
    ) {
        self.elapsed += h;
        self.impulse += self.force * h;
        let v_end = sim.body_state(c.chassis).map_or(0.0, |s| s.1);
        // The chassis' momentum gives the four tyres' impulse exactly; each tyre's own force,
        // sampled at the ends of the (sub-)steps, shares it. The remainder (a tyre that slid and
        // locked within a step) goes to the tyres in proportion to the grip each has left in
        // its direction: each stays within its grip, and the sum is exact.
        let total = (c.total * (v_end - self.v_start) - self.impulse) / self.elapsed;
        let (mut own, mut room, mut gx, mut force) = ([0.0; 4], [0.0; 4], [0.0; 4], [0.0; 4]);
        for k in 0..4 {
            let w = &mut self.wheels[k];
            force[k] = sim.element_torque(tyres.tyres[k]);
            w.tyre_impulse += force[k] * h;
            own[k] = w.tyre_impulse / self.elapsed;
            gx[k] = combined.longitudinal_weight(w.alpha(), w.kappa);
            room[k] = w.grip_load() * gx[k] * tyres.mf.d * tyres.surface[k];
        }
        let rest = total - own.iter().sum::<f64>();
        for k in 0..4 {
            room[k] = (room[k] - own[k].copysign(rest)).max(0.0);
        }
        let room_sum: f64 = room.iter().sum();
        let t = self.horizon.max(h);
        for k in 0..4 {
            let tyre = tyres.tyres[k];
            let w = &mut self.wheels[k];
            let m = c.mass[k];
            let load = w.grip_load();
            let alpha = w.alpha();
            let (d_force, gx) = (force[k], gx[k]);
            let v_slip = sim.element_relative_speed(tyre).unwrap_or(0.0);
            let spin = sim.body_state(tyres.wheels[k]).map_or(0.0, |s| s.1);
            let v_ground = spin * tyres.radius - v_slip;
            w.kappa = if sim.element_mode(tyre) == Some(FrictionMode::Stuck) || load == 0.0 {
                if load * gx > 0.0 {
                    rising_slip(tyres.mf, c.kappa_peak, d_force.abs() / (load * gx)).copysign(d_force)
                } else {
                    // In the air: the slip the rim would have on the ground.
                    v_slip / v_ground.abs().max(V_LOW)
                }
            } else {
                (c.kappa_peak + v_slip.abs() / v_ground.abs().max(V_LOW)).copysign(v_slip)
            };
            // Lateral: linearly implicit Magic Formula, stick at rest (see the module docs).
            let gy = combined.lateral_weight(w.kappa, alpha);
            let (vx, vy, ay) = (w.contact.speed_along, w.contact.speed_across, w.contact.accel_across);
            let cap = load * gy * combined.lateral.d;
            let cc = load * gy * combined.cornering_stiffness() / vx.abs().max(V_LOW);
            // At rest the tread holds the patch where it stuck: a spring on the patch's sideways
            // travel (a quarter of dead-beat on the wheel's share) besides the damping, so that no
            // steady side load (a yaw moment, a suspension's) makes it creep.
            w.anchor += vy * h;
            let m_lat = m * stick_share(w.contact.mass_across, c.total);
            let f_stick = -m_lat * vy / t - m * ay - 0.25 * m * w.anchor / (t * t);
            let f_impl = -cc * (vy + t * ay) / (1.0 + cc * t / m);
            let f_mf = load * gy * combined.lateral_value(alpha).abs();
            let blend = (vx.abs() / V_LOW).min(1.0);
            if blend >= 1.0 || f_stick.abs() > cap {
                // Moving, or sliding: the tread lets go.
                w.anchor = 0.0;
            }
            w.forces = WheelForces {
                longitudinal: own[k] + if room_sum > 0.0 { rest * room[k] / room_sum } else { rest * m / c.total },
                lateral: (1.0 - blend) * f_stick.clamp(-cap, cap) + blend * f_impl.clamp(-f_mf, f_mf),
                spin,
                slip_ratio: w.kappa,
                slip_angle: alpha,
                contact_speed: v_ground,
            };
        }
    }
}

/// The share of a wheel's mass its lateral stick corrects the slip with: [`STICK_SHARE`] of
/// the effective mass's share of the body's (`mass_across / total`, at most 1), or half when
/// the game does not give it.
fn stick_share(mass_across: f64, total: f64) -> f64 {
    if mass_across > 0.0 && total > 0.0 { STICK_SHARE * (mass_across / total).min(1.0) } else { 0.5 }
}

/// How much of the dead-beat correction on the effective mass the lateral stick applies: the
/// four tyres act at once on a body that also bounces on its springs; a correction that
/// overshoots rings.
pub const STICK_SHARE: f64 = 0.8;

/// What [`ChassisState::after_step`] reads of the wheels.
pub(crate) struct TyreIds<'a> {
    pub(crate) tyres: [usize; 4],
    pub(crate) wheels: [usize; 4],
    pub(crate) radius: f64,
    pub(crate) mf: &'a crate::tyre::MagicFormula,
    /// The surface friction factors ([`VehicleControl::set_surface_friction`]).
    pub(crate) surface: [f64; 4],
}
