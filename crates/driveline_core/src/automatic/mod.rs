//! Planetary automatic transmissions: gear trains built from tooth counts and a shift matrix
//! ([`gearbox`]), the hydraulic pistons of their wet clutches and brakes ([`hydraulics`]), the
//! vehicle-file section that puts them behind a torque converter ([`spec`]), and the
//! transmission controller that shifts them clutch-to-clutch ([`tcu`]).

pub mod gearbox;
pub mod hydraulics;
pub mod spec;
pub mod tcu;

pub use gearbox::{GearInfo, GearboxError, GearboxSpec, SetKind, SetSpec, ShaftSpec, ShiftElementSpec};
pub use spec::{
    AutomaticSpec, ElementThermalSpec, GearboxSource, LockupSpec, ParkSpec, ScheduleSpec, ShiftControlSpec,
};
pub use tcu::{
    ElementTelemetry, ElementTelemetryArray, LockupMode, MAX_ELEMENTS, Selector, ShiftPhase, ShiftReport, Tcu,
    TcuEvent, TcuInput, TcuOutput,
};
