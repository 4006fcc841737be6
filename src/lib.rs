//! # Driveline
//!
//! Modelica-grade vehicle driveline simulation at fixed time steps, as a plain Rust library and a
//! Bevy plugin. This facade re-exports the workspace crates:
//!
//! | crate | what it is |
//! |---|---|
//! | [`core`] (`driveline_core`) | element laws, network assembly, the exact stick-slip solver, scenario files; no Bevy |
//! | [`bevy`] (`bevy_driveline`) | the Bevy plugin: drivetrain parts as entities |
//!
//! Start with the [`core`] crate docs.

pub use bevy_driveline as bevy;
pub use driveline_core as core;
