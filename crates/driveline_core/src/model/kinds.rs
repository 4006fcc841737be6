//! What the solver and the file loaders ask of an element kind: its MSL name, flanges, heat
//! ports, signals and start values.

use super::*;

impl ElementKind {
    /// The MSL type name of this element, as written in scenario files.
    pub fn type_name(&self) -> &'static str {
        match self {
            ElementKind::Inertia { .. } => "Inertia",
            ElementKind::Fixed { .. } => "Fixed",
            ElementKind::Torque { .. } => "Torque",
            ElementKind::ConstantTorque { .. } => "ConstantTorque",
            ElementKind::Speed { .. } => "Speed",
            ElementKind::Position { .. } => "Position",
            ElementKind::KinematicClutch { .. } => "KinematicClutch",
            ElementKind::TorqueStep { .. } => "TorqueStep",
            ElementKind::QuadraticSpeedDependentTorque { .. } => "QuadraticSpeedDependentTorque",
            ElementKind::LinearSpeedDependentTorque { .. } => "LinearSpeedDependentTorque",
            ElementKind::InverseSpeedDependentTorque { .. } => "InverseSpeedDependentTorque",
            ElementKind::SignTorque { .. } => "SignTorque",
            ElementKind::Torque2 { .. } => "Torque2",
            ElementKind::EddyCurrentTorque { .. } => "EddyCurrentTorque",
            ElementKind::HeatCapacitor { .. } => "HeatCapacitor",
            ElementKind::ThermalConductor { .. } => "ThermalConductor",
            ElementKind::Convection { .. } => "Convection",
            ElementKind::FixedTemperature { .. } => "FixedTemperature",
            ElementKind::FixedHeatFlow { .. } => "FixedHeatFlow",
            ElementKind::ConstantSpeed { .. } => "ConstantSpeed",
            ElementKind::Accelerate { .. } => "Accelerate",
            ElementKind::Move { .. } => "Move",
            ElementKind::Disc { .. } => "Disc",
            ElementKind::RelativeStates { .. } => "RelativeStates",
            ElementKind::InitializeFlange { .. } => "InitializeFlange",
            ElementKind::IdealGearR2T { .. } => "IdealGearR2T",
            ElementKind::AngleSensor { .. } => "AngleSensor",
            ElementKind::SpeedSensor { .. } => "SpeedSensor",
            ElementKind::RelAngleSensor { .. } => "RelAngleSensor",
            ElementKind::RelSpeedSensor { .. } => "RelSpeedSensor",
            ElementKind::TorqueSensor { .. } => "TorqueSensor",
            ElementKind::PowerSensor { .. } => "PowerSensor",
            ElementKind::AccSensor { .. } => "AccSensor",
            ElementKind::RelAccSensor { .. } => "RelAccSensor",
            ElementKind::MultiSensor { .. } => "MultiSensor",
            ElementKind::IdealGear { .. } => "IdealGear",
            ElementKind::LossyGear { .. } => "LossyGear",
            ElementKind::Gearbox { .. } => "Gearbox",
            ElementKind::IdealPlanetary { .. } => "IdealPlanetary",
            ElementKind::Spring { .. } => "Spring",
            ElementKind::Damper { .. } => "Damper",
            ElementKind::SpringDamper { .. } => "SpringDamper",
            ElementKind::ElastoBacklash { .. } => "ElastoBacklash",
            ElementKind::ElastoBacklash2 { .. } => "ElastoBacklash2",
            ElementKind::Clutch { .. } => "Clutch",
            ElementKind::OneWayClutch { .. } => "OneWayClutch",
            ElementKind::ElasticClutch { .. } => "ElasticClutch",
            ElementKind::Brake { .. } => "Brake",
            ElementKind::BearingFriction { .. } => "BearingFriction",
            ElementKind::Mass { .. } => "Mass",
            ElementKind::IdealRollingWheel { .. } => "IdealRollingWheel",
            ElementKind::QuadraticSpeedDependentForce { .. } => "QuadraticSpeedDependentForce",
            ElementKind::Force { .. } => "Force",
            ElementKind::LinearSpeed { .. } => "LinearSpeed",
            ElementKind::Engine { .. } => "Engine",
            ElementKind::Tyre { .. } => "Tyre",
            ElementKind::DogClutch { .. } => "DogClutch",
            ElementKind::LimitedSlip { .. } => "LimitedSlip",
            ElementKind::TorqueConverter { .. } => "TorqueConverter",
        }
    }

    /// The element's flanges with their domains. A flange marked `required` must be connected.
    pub fn flanges(&self) -> &'static [(&'static str, Domain, Requirement)] {
        use Domain::*;
        use Requirement::*;
        match self {
            ElementKind::Inertia { .. } => &[("flange_a", Rotational, Optional), ("flange_b", Rotational, Optional)],
            ElementKind::Fixed { .. } => &[("flange", Rotational, Optional)],
            ElementKind::Torque { .. }
            | ElementKind::Speed { .. }
            | ElementKind::Position { .. }
            | ElementKind::ConstantTorque { .. }
            | ElementKind::TorqueStep { .. }
            | ElementKind::QuadraticSpeedDependentTorque { .. }
            | ElementKind::LinearSpeedDependentTorque { .. }
            | ElementKind::InverseSpeedDependentTorque { .. }
            | ElementKind::SignTorque { .. }
            | ElementKind::ConstantSpeed { .. }
            | ElementKind::Accelerate { .. }
            | ElementKind::Move { .. }
            | ElementKind::EddyCurrentTorque { .. } => {
                &[("flange", Rotational, Required), ("support", Rotational, Support)]
            }
            ElementKind::HeatCapacitor { .. }
            | ElementKind::ThermalConductor { .. }
            | ElementKind::Convection { .. }
            | ElementKind::FixedTemperature { .. }
            | ElementKind::FixedHeatFlow { .. } => &[],
            ElementKind::Torque2 { .. }
            | ElementKind::Disc { .. }
            | ElementKind::RelativeStates { .. }
            | ElementKind::RelAccSensor { .. }
            | ElementKind::RelAngleSensor { .. }
            | ElementKind::RelSpeedSensor { .. }
            | ElementKind::TorqueSensor { .. }
            | ElementKind::PowerSensor { .. }
            | ElementKind::MultiSensor { .. } => {
                &[("flange_a", Rotational, Required), ("flange_b", Rotational, Required)]
            }
            ElementKind::AngleSensor { .. }
            | ElementKind::SpeedSensor { .. }
            | ElementKind::AccSensor { .. }
            | ElementKind::InitializeFlange { .. } => &[("flange", Rotational, Required)],
            ElementKind::IdealGear { .. } | ElementKind::LossyGear { .. } => &[
                ("flange_a", Rotational, Required),
                ("flange_b", Rotational, Required),
                ("support", Rotational, Support),
            ],
            // An open shaft of a planetary set carries no torque (MSL allows it): the other two
            // turn freely, the open one as the kinematics say. Two open shafts leave a massless
            // one undetermined, which the mass check refuses.
            ElementKind::IdealPlanetary { .. } => {
                &[("sun", Rotational, Optional), ("carrier", Rotational, Optional), ("ring", Rotational, Optional)]
            }
            ElementKind::Gearbox { .. } => &[
                ("flange_a", Rotational, Required),
                ("flange_b", Rotational, Required),
                ("support", Rotational, Support),
                ("mesh", Rotational, Optional),
            ],
            ElementKind::Spring { .. }
            | ElementKind::Damper { .. }
            | ElementKind::SpringDamper { .. }
            | ElementKind::ElastoBacklash { .. }
            | ElementKind::ElastoBacklash2 { .. }
            | ElementKind::Clutch { .. }
            | ElementKind::OneWayClutch { .. }
            | ElementKind::ElasticClutch { .. }
            | ElementKind::KinematicClutch { .. } => {
                &[("flange_a", Rotational, Required), ("flange_b", Rotational, Required)]
            }
            ElementKind::Brake { .. } | ElementKind::BearingFriction { .. } => &[
                ("flange_a", Rotational, Optional),
                ("flange_b", Rotational, Optional),
                ("support", Rotational, Support),
            ],
            ElementKind::Mass { .. } => &[("flange_a", Translational, Optional), ("flange_b", Translational, Optional)],
            ElementKind::IdealRollingWheel { .. } | ElementKind::IdealGearR2T { .. } => {
                &[("flangeR", Rotational, Required), ("flangeT", Translational, Required)]
            }
            ElementKind::QuadraticSpeedDependentForce { .. } | ElementKind::Force { .. } => {
                &[("flange", Translational, Required)]
            }
            ElementKind::LinearSpeed { .. } => {
                &[("flange", Translational, Required), ("support", Translational, Support)]
            }
            ElementKind::Engine { .. } => &[("flange", Rotational, Required), ("support", Rotational, Support)],
            ElementKind::Tyre { .. } => &[("wheel", Rotational, Required), ("ground", Translational, Required)],
            ElementKind::DogClutch { .. } | ElementKind::LimitedSlip { .. } => {
                &[("flange_a", Rotational, Optional), ("flange_b", Rotational, Optional)]
            }
            ElementKind::TorqueConverter { .. } => {
                &[("pump", Rotational, Required), ("turbine", Rotational, Required), ("support", Rotational, Support)]
            }
        }
    }

    /// Every signal parameter of the element (for reference resolution and validation).
    pub fn signals_mut(&mut self) -> Vec<&mut Signal> {
        match self {
            ElementKind::Torque { tau, .. } | ElementKind::Torque2 { tau } => vec![tau],
            ElementKind::Move { phi, w, a, .. } => vec![phi, w, a],
            ElementKind::Accelerate { a_ref, .. } => vec![a_ref],
            ElementKind::EddyCurrentTorque { tau_nominal, .. } => vec![tau_nominal],
            ElementKind::Convection { Gc } => vec![Gc],
            ElementKind::Speed { w_ref, .. } => vec![w_ref],
            ElementKind::Position { phi_ref, .. } => vec![phi_ref],
            ElementKind::KinematicClutch { command, .. } => vec![command],
            ElementKind::ElasticClutch { limit, .. } => vec![limit],
            ElementKind::Clutch { f_normalized, .. }
            | ElementKind::OneWayClutch { f_normalized, .. }
            | ElementKind::Brake { f_normalized, .. } => vec![f_normalized],
            ElementKind::Force { f } => vec![f],
            ElementKind::LinearSpeed { v_ref, .. } => vec![v_ref],
            ElementKind::Engine { throttle, .. } => vec![throttle],
            ElementKind::Tyre { load, .. } => vec![load],
            ElementKind::DogClutch { engaged, .. } => vec![engaged],
            _ => Vec::new(),
        }
    }

    /// Replaces the fixed start values with a current state: `(angle, speed)` for bodies,
    /// `(phi_rel, w_rel)` for elements with a relative coordinate. Used to rebuild a changed
    /// network from where the old one was ("warm" rebuild).
    pub fn set_start_state(&mut self, body: Option<(f64, f64)>, relative: Option<(f64, f64)>) {
        use ElementKind::*;
        match self {
            Inertia { phi_start, w_start, .. } | Mass { s_start: phi_start, v_start: w_start, .. } => {
                if let Some((p, w)) = body {
                    *phi_start = Some(p);
                    *w_start = Some(w);
                }
            }
            Spring { phi_rel_start, w_rel_start, .. }
            | Damper { phi_rel_start, w_rel_start, .. }
            | SpringDamper { phi_rel_start, w_rel_start, .. }
            | ElastoBacklash { phi_rel_start, w_rel_start, .. }
            | ElastoBacklash2 { phi_rel_start, w_rel_start, .. }
            | Clutch { phi_rel_start, w_rel_start, .. }
            | OneWayClutch { phi_rel_start, w_rel_start, .. }
            | ElasticClutch { phi_rel_start, w_rel_start, .. }
            | RelativeStates { phi_rel_start, w_rel_start }
            | Gearbox { phi_rel_start, w_rel_start, .. } => {
                if let Some((p, w)) = relative {
                    *phi_rel_start = Some(p);
                    *w_rel_start = Some(w);
                }
            }
            Speed { phi_start, .. } | ConstantSpeed { phi_start, .. } => {
                if let Some((p, _)) = relative {
                    *phi_start = Some(p);
                }
            }
            Accelerate { phi_start, w_start, .. } => {
                if let Some((p, w)) = relative {
                    *phi_start = Some(p);
                    *w_start = w;
                }
            }
            // The bodies' present state carries the flange's: its start values would repeat them.
            InitializeFlange { phi_start, w_start } => {
                *phi_start = None;
                *w_start = None;
            }
            _ => {}
        }
    }

    /// True when the element has a support flange switched on by `use_support`.
    pub fn uses_support(&self) -> bool {
        match self {
            ElementKind::Torque { use_support, .. }
            | ElementKind::Speed { use_support, .. }
            | ElementKind::Position { use_support, .. }
            | ElementKind::ConstantTorque { use_support, .. }
            | ElementKind::TorqueStep { use_support, .. }
            | ElementKind::QuadraticSpeedDependentTorque { use_support, .. }
            | ElementKind::LinearSpeedDependentTorque { use_support, .. }
            | ElementKind::InverseSpeedDependentTorque { use_support, .. }
            | ElementKind::SignTorque { use_support, .. }
            | ElementKind::ConstantSpeed { use_support, .. }
            | ElementKind::LinearSpeed { use_support, .. }
            | ElementKind::Accelerate { use_support, .. }
            | ElementKind::Move { use_support, .. }
            | ElementKind::EddyCurrentTorque { use_support, .. }
            | ElementKind::IdealGear { use_support, .. }
            | ElementKind::LossyGear { use_support, .. }
            | ElementKind::Gearbox { use_support, .. }
            | ElementKind::Brake { use_support, .. }
            | ElementKind::BearingFriction { use_support, .. }
            | ElementKind::Engine { use_support, .. }
            | ElementKind::TorqueConverter { use_support, .. } => *use_support,
            _ => false,
        }
    }

    /// The element's heat ports (`Modelica.Thermal.HeatTransfer`), connected like flanges in
    /// [`NetworkSpec::connections`] but only to heat ports. A dissipative element's `heatPort`
    /// receives its `lossPower` (MSL `useHeatPort = true` when it is connected; left open, the
    /// heat leaves the model as with `useHeatPort = false`).
    pub fn heat_ports(&self) -> &'static [&'static str] {
        use ElementKind::*;
        match self {
            HeatCapacitor { .. } | FixedTemperature { .. } | FixedHeatFlow { .. } => &["port"],
            ThermalConductor { .. } => &["port_a", "port_b"],
            Convection { .. } => &["solid", "fluid"],
            Damper { .. }
            | SpringDamper { .. }
            | ElastoBacklash { .. }
            | ElastoBacklash2 { .. }
            | Clutch { .. }
            | OneWayClutch { .. }
            | Brake { .. }
            | BearingFriction { .. }
            | LossyGear { .. }
            | Gearbox { .. }
            | EddyCurrentTorque { .. }
            | ElasticClutch { .. }
            | KinematicClutch { .. }
            | DogClutch { .. }
            | LimitedSlip { .. }
            | TorqueConverter { .. }
            | Tyre { .. } => &["heatPort"],
            _ => &[],
        }
    }

    /// True for the elements of the thermal network (no flanges, heat ports only).
    pub fn is_thermal(&self) -> bool {
        self.flanges().is_empty()
    }

    /// True for the friction elements that carry a stuck/sliding/free mode.
    pub fn is_friction(&self) -> bool {
        matches!(
            self,
            ElementKind::Clutch { .. }
                | ElementKind::OneWayClutch { .. }
                | ElementKind::Brake { .. }
                | ElementKind::BearingFriction { .. }
                | ElementKind::LossyGear { .. }
                | ElementKind::Tyre { .. }
                | ElementKind::LimitedSlip { .. }
        )
    }
}
