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
//! Run the physics engine at the fixed rate, as avian does by default (its `PhysicsPlugins`
//! in `FixedPostUpdate`): one driveline step per physics step, which the coupling is exact and
//! stable at. A physics engine stepping less often writes the contacts and applies the forces
//! once per physics step: a contact not written again is held, and the forces are the means
//! since the last write.
//!
//! The coupling scheme, why it is stable at a game's step and how it holds a parked car
//! without creep: `driveline_core::vehicle::chassis`.

use bevy_ecs::prelude::*;
use bevy_reflect::prelude::*;
use driveline_core::vehicle as core;
use serde::{Deserialize, Serialize};

/// What the game's chassis says of one wheel before the step
/// (`driveline_core::vehicle::WheelContact`: the normal load, the contact point's velocity
/// along and across the wheel's heading, the surface friction, gravity's components): write it
/// every fixed step, before `DrivelineSystems::Control`. A vehicle spawned on `Road::Chassis`
/// starts with each wheel's static share of the weight. A non-finite field is refused with a
/// [`crate::DrivelineEditRefused`] naming the wheel and field, each step it stays so; the last
/// valid value is used.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WheelContact(pub core::WheelContact);

/// What the driveline did at one wheel in the last step (`driveline_core::vehicle::WheelForces`:
/// the tyre's mean longitudinal and lateral forces on the chassis, the wheel's spin, slip
/// ratio and slip angle): written in `DrivelineSystems::Solve`; apply the forces to the chassis
/// at the contact point before its physics step.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WheelForces(pub core::WheelForces);

/// Hands the wheels' contacts written since the last take to a vehicle's controllers (a contact
/// not written again is held: a physics engine stepping less often than the driveline writes
/// once per physics step); a refused field is returned as `(wheel part, message)`.
pub(crate) fn take_contacts(
    control: &mut core::VehicleControl,
    wheels: &[Entity],
    contacts: &Query<Ref<WheelContact>>,
    mut refused: impl FnMut(Entity, String),
) {
    for (k, &wheel) in wheels.iter().enumerate().take(4) {
        if let Ok(c) = contacts.get(wheel)
            && c.is_changed()
            && let Err(e) = control.set_chassis_contact(k, &c.0)
        {
            refused(wheel, format!("WheelContact of wheel {}: {e}", core::WHEELS[k]));
        }
    }
}

pub(crate) fn register_types(app: &mut bevy_app::App) {
    app.register_type::<WheelContact>().register_type::<WheelForces>();
}
