//! # driveline_core
//!
//! The numeric core of Driveline (no Bevy).
#![warn(missing_docs)]

pub mod elements;
pub mod linalg;
pub mod model;
pub mod network;
pub mod output;
pub mod scenario;
pub mod signal;
pub mod solver;
pub mod table;

pub use model::{Domain, ElementKind, ElementSpec, NetworkSpec};
pub use network::{BuildError, Network};
pub use output::CsvRecorder;
pub use scenario::{Scenario, ScenarioError};
pub use signal::Signal;
pub use solver::{EnergyLedger, FrictionMode, IntegrationParameters, ModeEvent, Simulation, StepError, StepStats};
pub use table::Table1D;
