//! Bevy plugin (skeleton arrives in the next change).
