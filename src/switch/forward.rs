//! Forwarding: the destination NIC picks the equal-cost group of next hops
//! from the switch's routing table (`topology::routing`).

use crate::topology::routing::{SwitchRoutes, NO_ROUTE};
use crate::topology::NicId;

#[inline]
pub fn lookup(routes: &SwitchRoutes, dst: NicId, dst_class: u32) -> Option<u32> {
    let g = routes.group_for(dst, dst_class);
    (g != NO_ROUTE).then_some(g)
}
