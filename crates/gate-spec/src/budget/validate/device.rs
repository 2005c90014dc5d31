//! `device:`: the card that is gated, its memory and the per-process reserve.

use super::context::{find, Ctx};
use super::hints::DEVICE_KEYS;
use crate::budget::tree::Node;
use crate::budget::DeviceSpec;
use crate::config::Pos;
use crate::units::Bytes;

pub(super) fn validate_device(cx: &mut Ctx, node: &Node) -> Option<DeviceSpec> {
    let entries = cx.map(node, "device")?;
    cx.known_keys(entries, DEVICE_KEYS, "device");
    let name = cx
        .required(
            entries,
            "name",
            node.pos(),
            "device.name",
            "name the card, e.g. `name: RTX 3050 Ti Laptop`",
        )
        .and_then(|n| cx.text(n, "device.name").map(str::to_string));
    let capacity = cx
        .required(
            entries,
            "capacity",
            node.pos(),
            "device.capacity",
            "give the card's memory, e.g. `capacity: 4 GiB`",
        )
        .and_then(|n| cx.size(n, "device.capacity"));
    let reserve = match find(entries, "reserve") {
        Some(n) => cx.size(n, "device.reserve"),
        None => Some(Bytes(0)),
    };
    if let (Some(c), Some(r), Some(n)) = (capacity, reserve, find(entries, "reserve")) {
        if r >= c {
            cx.err(
                n.pos(),
                format!("device.reserve ({r}) is not smaller than device.capacity ({c})"),
                "the reserve is the per-process context cost; it must leave room for the models",
            );
        }
    }
    let emulate = emulate(cx, entries);
    Some(DeviceSpec {
        name: name?,
        capacity: capacity?,
        reserve: reserve?,
        emulate: emulate?,
    })
}

/// `emulate: true` or `false` (false when not written).
fn emulate(cx: &mut Ctx, entries: &[(String, Pos, Node)]) -> Option<bool> {
    let Some(n) = find(entries, "emulate") else {
        return Some(false);
    };
    match cx.text(n, "device.emulate")? {
        "true" => Some(true),
        "false" => Some(false),
        other => {
            cx.err(
                n.pos(),
                format!("device.emulate must be true or false, found `{other}`"),
                "write `emulate: true` to emulate the card's capacity on a larger GPU",
            );
            None
        }
    }
}
