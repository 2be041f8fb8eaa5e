//! The engine through its door.
