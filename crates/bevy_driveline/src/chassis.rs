//! A game's rigid-body chassis under a vehicle: [`WheelContact`], which the game writes on each
//! wheel part, and [`WheelForces`], which it reads back. A vehicle spawned on
//! [`Road::Chassis`](driveline_core::vehicle::Road::Chassis) carries both on each of
//! [`VehicleParts::wheels`](crate::vehicle::VehicleParts).
//!
//! Each fixed step, in this order:
//! 1. before [`DrivelineSystems::Control`](crate::DrivelineSystems) (in `Input`, say), the game
//!    writes every wheel's [`WheelContact`] from its chassis as the physics engine left it: the
//!    suspension's normal load, the contact point's velocity along and across the wheel's
//!    heading, the surface friction, gravity's components along and across;
//! 2. the plugin steps the driveline (`control_vehicles` takes the contacts);
//! 3. after [`DrivelineSystems::Solve`](crate::DrivelineSystems), the game reads every wheel's
//!    [`WheelForces`] and applies `longitudinal` along the heading and `lateral` across it at
//!    the contact point, for its physics engine's next step.
//!
//! The coupling scheme, why it is stable at a game's step and how it holds a parked car
//! without creep: `driveline_core::vehicle::chassis`.

use bevy_ecs::prelude::*;
use bevy_reflect::prelude::*;
use driveline_core::vehicle as core;
use serde::{Deserialize, Serialize};

/// What the game's chassis says of one wheel before the step: write it every fixed step, before
/// `DrivelineSystems::Control`. A non-finite field is refused with a
/// [`crate::DrivelineEditRefused`] naming the wheel and field; the last valid value is kept.
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[reflect(Component, Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WheelContact {
    /// Whether the tyre touches the ground; `false` is a wheel in the air (no load, no force).
    /// Default true.
    pub in_contact: bool,
    /// Normal load from the suspension, N (>= 0; below 0 counts as 0). Default: the wheel's
    /// static share of the weight until the game writes.
    pub load: f64,
    /// Velocity of the chassis at the contact point over the ground, along the wheel's
    /// heading (forward positive), m/s. Default 0.
    pub speed_along: f64,
    /// The same across the heading (to the wheel's left positive), m/s. Default 0.
    pub speed_across: f64,
    /// Surface friction relative to the tyre's own: 1 dry road, 0.5 wet, 0.1 ice; [0, 10].
    /// Default 1.
    pub friction: f64,
    /// The chassis' acceleration at this wheel along its heading from everything but the
    /// tyres: gravity's component along the heading at least (`gravity . heading`), m/s^2.
    /// Default 0.
    pub accel_along: f64,
    /// The same across the heading (gravity's component on a side slope), m/s^2. Default 0.
    pub accel_across: f64,
}

impl Default for WheelContact {
    fn default() -> Self {
        core::WheelContact::default().into()
    }
}

impl From<core::WheelContact> for WheelContact {
    fn from(c: core::WheelContact) -> Self {
        Self {
            in_contact: c.in_contact,
            load: c.load,
            speed_along: c.speed_along,
            speed_across: c.speed_across,
            friction: c.friction,
            accel_along: c.accel_along,
            accel_across: c.accel_across,
        }
    }
}

impl From<WheelContact> for core::WheelContact {
    fn from(c: WheelContact) -> Self {
        Self {
            in_contact: c.in_contact,
            load: c.load,
            speed_along: c.speed_along,
            speed_across: c.speed_across,
            friction: c.friction,
            accel_along: c.accel_along,
            accel_across: c.accel_across,
        }
    }
}

/// What the driveline did at one wheel in the last step: written in `DrivelineSystems::Solve`;
/// apply the forces to the chassis at the contact point before its physics step.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[reflect(Component, Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WheelForces {
    /// Tyre force on the chassis along the wheel's heading, forward positive, N: the mean over
    /// the step.
    pub longitudinal: f64,
    /// Tyre force on the chassis across the heading, to the wheel's left positive, N.
    pub lateral: f64,
    /// The wheel's spin, rad/s.
    pub spin: f64,
    /// Slip ratio (positive when the tyre's rim runs faster than the ground).
    pub slip_ratio: f64,
    /// Slip angle, rad.
    pub slip_angle: f64,
    /// The contact point's speed along the heading at the end of the step as the driveline
    /// took it, m/s.
    pub contact_speed: f64,
}

impl From<core::WheelForces> for WheelForces {
    fn from(f: core::WheelForces) -> Self {
        Self {
            longitudinal: f.longitudinal,
            lateral: f.lateral,
            spin: f.spin,
            slip_ratio: f.slip_ratio,
            slip_angle: f.slip_angle,
            contact_speed: f.contact_speed,
        }
    }
}

/// Hands the wheels' contacts to a vehicle's controllers; a refused field is returned as
/// `(wheel part, message)`.
pub(crate) fn take_contacts(
    control: &mut core::VehicleControl,
    wheels: &[Entity],
    contacts: &Query<&WheelContact>,
    mut refused: impl FnMut(Entity, String),
) {
    for (k, &wheel) in wheels.iter().enumerate().take(4) {
        if let Ok(c) = contacts.get(wheel)
            && let Err(e) = control.set_chassis_contact(k, &(*c).into())
        {
            refused(wheel, format!("WheelContact of wheel {}: {e}", core::WHEELS[k]));
        }
    }
}

pub(crate) fn register_types(app: &mut bevy_app::App) {
    app.register_type::<WheelContact>().register_type::<WheelForces>();
}
