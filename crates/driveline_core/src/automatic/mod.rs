//! Planetary automatic transmissions: gear trains built from tooth counts and a shift matrix
//! ([`gearbox`]), the hydraulic actuation of their wet clutches and brakes, and the
//! transmission controller that shifts them clutch-to-clutch.

pub mod gearbox;

pub use gearbox::{GearInfo, GearboxError, GearboxSpec, SetKind, SetSpec, ShaftSpec, ShiftElementSpec};
