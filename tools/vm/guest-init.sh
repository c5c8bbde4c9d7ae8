#!/bin/sh
# PID 1 of the bledfu test VM (busybox initramfs built by tools/vm-test): mounts what the scenarios need, mounts
# the host's out/vm-test directory (9p) at /mnt/out, runs /vm/scenarios.sh and powers the VM off, always.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mkdir -p /mnt/out
# The loopback interface, as every init brings it up: programs expect 127.0.0.1 (Foundation's CFSocket makes its
# wake-up pair there; with lo down it printed "Could not create wakeup socket pair for CFSocket" and a batch that
# still used Foundation's Process waited forever for its children, docs/reliability.md).
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

halt_now() { sync; poweroff -f; sleep 5; echo o > /proc/sysrq-trigger; }

WATCHDOG=240
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	vmtest.watchdog=*) WATCHDOG=${arg#*=} ;;
	vmtest.only=*) export VMTEST_ONLY=${arg#*=} ;;
	esac
done
# The guest's own bound, on top of the host's `timeout` around QEMU.
( sleep "$WATCHDOG"; echo "FAIL: guest watchdog: the scenarios took more than $WATCHDOG s"; echo "VMTEST RESULT: FAIL"; halt_now ) &

echo "VMTEST: init at uptime $(cut -d' ' -f1 /proc/uptime) s, kernel $(uname -r)"
if modprobe -a virtio_pci 9pnet_virtio 9p &&
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /mnt/out; then
	echo "VMTEST: out/vm-test mounted at /mnt/out"
else
	echo "VMTEST: no 9p share: captures stay in the guest"
fi
sh /vm/scenarios.sh
echo "VMTEST: scenarios exit code $?"
sync
halt_now
