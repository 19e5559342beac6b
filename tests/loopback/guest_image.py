# SPDX-License-Identifier: Apache-2.0
"""The guest image of the loopback cloud: a 1 MiB raw disk whose boot
sector is the whole guest.

Built here, from these bytes, at test time: no download, no kernel (a
container often has no ``/boot/vmlinuz-*``), no bootloader package. QEMU's
firmware (SeaBIOS, shipped with qemu-system-x86) loads the boot sector at
0x7c00 and jumps to it; the code writes :data:`BANNER` to the first serial
port and halts with interrupts off, so the domain stays running, idle,
until Nova destroys it. The fake computes never read the image; the
libvirt compute (:mod:`tests.loopback.hypervisor`) boots it.
"""

import struct

BANNER = b'nova-ext loopback guest up\r\n'
SIZE = 1024 * 1024
COM1 = 0x3f8
LOAD_ADDRESS = 0x7c00
SECTOR = 512
PARTITION_TABLE = 446
# One partition over the rest of the disk ("non-FS data"): glance and Nova
# inspect an upload that ends its first sector in 0x55aa as an MBR disk and
# refuse one without partitions.
PARTITION = struct.pack('<B3BB3BII', 0x80, 0, 2, 0, 0xda, 0, 0, 0,
                        1, SIZE // SECTOR - 1)

# 16-bit real mode, hand-assembled; offsets in the comments
_CODE_BEFORE_MESSAGE = (
    b'\xfa'              # 0   cli
    b'\x31\xc0'          # 1   xor ax, ax
    b'\x8e\xd8'          # 3   mov ds, ax
    b'\xbe%s'            # 5   mov si, message
    b'\xba' + struct.pack('<H', COM1) +  # 8   mov dx, COM1
    b'\xac'              # 11  next: lodsb
    b'\x84\xc0'          # 12  test al, al
    b'\x74\x03'          # 14  jz halt
    b'\xee'              # 16  out dx, al
    b'\xeb\xf8'          # 17  jmp next
    b'\xf4'              # 19  halt: hlt
    b'\xeb\xfd'          # 20  jmp halt
)                        # 22  message


def boot_sector():
    # the placeholder and the address it becomes are both 2 bytes long
    message_offset = len(_CODE_BEFORE_MESSAGE)
    code = _CODE_BEFORE_MESSAGE.replace(
        b'%s', struct.pack('<H', LOAD_ADDRESS + message_offset))
    sector = code + BANNER + b'\0'
    if len(sector) > PARTITION_TABLE:
        raise ValueError('boot sector code is %d bytes' % len(sector))
    return (sector.ljust(PARTITION_TABLE, b'\0') + PARTITION.ljust(64, b'\0')
            + b'\x55\xaa')


def boot_disk():
    """The raw disk image: the boot sector, then zeros."""
    return boot_sector().ljust(SIZE, b'\0')
