"""Status packets checked against the read they answer, on a Feetech bus driven through scservo_sdk.

scservo_sdk's `readRx` (what `GroupSyncRead`, and so LeRobot's `sync_read`, uses for each motor's
answer) takes the first bytes of the next status packet that carries the motor's id. A reply that came
after the packet timeout of an earlier transaction (a slow servo, a loaded host) is still in the
serial input buffer (`PortHandler.clearPort` flushes only the output), so it can pass for the answer
to the next read: a late health answer read as Present_Position puts a joint ~180 degrees away from
where it is, and the envelope and the hold both start from the measured state. A status packet's
length field says how many bytes it carries; one that does not fit the read is skipped and logged.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["reject_late_replies"]


def reject_late_replies(packet_handler: Any) -> None:
    """Make this packet handler's `readRx` skip a status packet whose data length is not the read's
    (a late answer to another read), waiting for the real answer within the same packet timeout."""
    if getattr(packet_handler, "_late_replies_rejected", False):
        return
    import scservo_sdk as scs
    from scservo_sdk.protocol_packet_handler import PKT_ERROR, PKT_ID, PKT_LENGTH, PKT_PARAMETER0

    def read_rx(port: Any, scs_id: int, length: int) -> tuple[list[int], int, int]:
        while True:
            packet, result = packet_handler.rxPacket(port)
            if result != scs.COMM_SUCCESS:
                return [], result, 0
            if packet[PKT_ID] == scs_id and packet[PKT_LENGTH] == length + 2:   # error byte + checksum
                return list(packet[PKT_PARAMETER0:PKT_PARAMETER0 + length]), result, packet[PKT_ERROR]
            logger.warning("servo bus: skipped a late status packet (id %d, %d data bytes) while reading "
                           "%d bytes from id %d", packet[PKT_ID], packet[PKT_LENGTH] - 2, length, scs_id)

    packet_handler.readRx = read_rx
    packet_handler._late_replies_rejected = True
