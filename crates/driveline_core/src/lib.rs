//! # driveline_core
//!
//! The numeric core of Driveline: element laws, network assembly, the exact fixed-step
//! stick-slip solver and scenario files. No Bevy; everything here is plain data and functions,
//! tested and benchmarked on its own.
//!
//! ## Getting started
//! ```
//! use driveline_core::{ElementKind, ElementSpec, Network, NetworkSpec, Signal, Simulation};
//! // A flywheel spun up by a constant 2 N m from rest: w(t) = 2 t / J.
//! let spec = NetworkSpec {
//!     elements: vec![
//!         ElementSpec { name: "J".into(), kind: ElementKind::Inertia { J: 0.5, phi_start: Some(0.0), w_start: Some(0.0) } },
//!         ElementSpec { name: "motor".into(), kind: ElementKind::Torque { tau: Signal::Constant(2.0), use_support: false } },
//!     ],
//!     connections: vec![("motor.flange".into(), "J.flange_a".into())],
//! };
//! let mut sim = Simulation::new(Network::build(&spec).unwrap());
//! for _ in 0..1000 {
//!     sim.step(1e-3).unwrap();
//! }
//! let (_, w) = sim.body_state(0).unwrap();
//! assert!((w - 4.0).abs() < 1e-12);
//! ```
//!
//! ## Concepts
//! - **Flanges and nodes.** Every element has named flanges (`flange_a`, `flange_b`, `support`,
//!   `sun`, ...). Connected flanges form a *node* with one angle; inertias lump onto their node.
//!   Nodes joined to a `Fixed` are grounds.
//! - **Sign conventions** (Modelica.Mechanics.Rotational): `phi_rel = phi_b - phi_a`; a
//!   two-flange element with torque `tau` pushes its a-side body with `+tau` and its b-side body
//!   with `-tau`; a torque source with positive signal accelerates its flange forwards.
//! - **Friction modes** use the MSL codes: -1 sliding backward, 0 stuck, 1 sliding forward,
//!   2 free. A stuck element carries whatever torque keeps its slip at zero, up to
//!   `peak * tau0`; a sliding one carries its kinetic torque against the slip.
//!
//! ## The solver
//! See [`solver`]: per step, a joint complementarity solve of all stuck candidates, Gauss-Legendre
//! (order 4, A-stable) integration on the null space of the active constraints (so locks are
//! exact), and event location inside the step. Every tunable is in [`IntegrationParameters`].
//!
//! ## Element catalogue
//! Every element, its flanges, parameters (units, defaults) and equation is documented on
//! [`ElementKind`]; the laws themselves live in [`elements`], one place each.
//!
//! ## Scheduling
//! [`Simulation::step`] is synchronous and allocation-free after the first step; call it from
//! any fixed-rate loop. The Bevy plugin runs it in a fixed schedule.
//!
//! ## FAQ
//! - *Why does my clutch not lock?* Its slip must reach zero while the torque it would need
//!   stays within `peak * tau0`. Check `fn_max`, `cgeo`, `mu_pos` and the normal-force signal.
//! - *Why is my network rejected as massless?* A junction without inertia whose speed no gear
//!   determines has no dynamics; add an `Inertia` there.
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
pub use solver::{
    EnergyLedger, FrictionMode, InputError, IntegrationParameters, ModeEvent, Simulation, StepError, StepStats,
};
pub use table::Table1D;
