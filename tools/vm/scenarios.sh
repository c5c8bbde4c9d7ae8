#!/bin/sh
# The bledfu VM scenarios, run inside the guest as root on the real Linux Bluetooth stack (see docs/vm-test.md).
# Two LE controllers from btvirt: hci1 carries the virtual bracelet (`bledfu simulate --adapter hci1`), hci0 the
# real `bledfu`. Prints one "PASS: ..." or "FAIL: ..." line per check and "VMTEST RESULT: PASS|FAIL" at the end.
# Captures (btmon btsnoop files) and logs go to /mnt/out (the host's out/vm-test).
export PATH=/vm/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp
OUT=/mnt/out
grep -q " $OUT 9p " /proc/mounts || { OUT=/tmp/out; mkdir -p "$OUT"; }
FW=/vm/Firmware
KEY=$FW/keys/test-signing-key-DO-NOT-USE.pub.pem
PKG=$FW/samples/bracelet-app-v2.zip
APP=C6:05:04:03:02:01   # Firmware/bracelet.json, static random address
BOOT=C6:05:04:03:02:02  # the bootloader after the buttonless jump: address + 1
STATUS_NAME=C6-05-04-03-02-01.json
FAILED=0
PIDS=""

up() { cut -d' ' -f1 /proc/uptime; }
since() { echo "$(up) $1" | awk '{printf "%.1f", $1 - $2}'; }
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=1; }
note() { echo "VMTEST: $*"; }
# wait_for <seconds> <command...>: polls every 0.2 s
wait_for() {
	n=$(($1 * 5)); shift
	while [ $n -gt 0 ]; do "$@" && return 0; n=$((n - 1)); sleep 0.2; done
	return 1
}
stop_pid() { [ -n "$1" ] && kill "$1" 2>/dev/null && { wait "$1" 2>/dev/null; true; }; }
show() { echo "---- $1 ----"; tail -n "${2:-40}" "$1" 2>/dev/null; }
# bounded SECONDS COMMAND...: runs COMMAND (output as the caller redirects it) for at most SECONDS, like `timeout`,
# but a command still running then is a hang to read: its threads' kernel state (run state, wait channel, the
# syscall each sits in) and every thread's stack (eu-stack, from elfutils, when the host had it) go to its standard error
# before it is killed. Returns 124 for a hang, else the command's status.
bounded() {
	limit=$1; shift
	"$@" &
	bpid=$!
	n=$((limit * 5))
	while [ $n -gt 0 ] && kill -0 $bpid 2>/dev/null; do sleep 0.2; n=$((n - 1)); done
	kill -0 $bpid 2>/dev/null || { wait $bpid; return; }
	echo "VMTEST HANG: still running after $limit s: $*" >&2
	for t in /proc/$bpid/task/*; do
		echo "VMTEST HANG: thread $(basename "$t") $(cat "$t/comm" 2>/dev/null): state $(cut -d' ' -f3 "$t/stat" 2>/dev/null), wchan $(cat "$t/wchan" 2>/dev/null), syscall $(cat "$t/syscall" 2>/dev/null)" >&2
	done
	if command -v eu-stack > /dev/null; then
		timeout 60 eu-stack -i -p $bpid >&2 2>&1
	fi
	kill -9 $bpid 2>/dev/null
	wait $bpid 2>/dev/null
	return 124
}
links_closed() { [ "$(grep -c ' connected$' "$1")" = "$(grep -c ' disconnected$' "$1")" ]; }
data_offset() { grep -o '"data_offset" : [0-9]*' "$1" 2>/dev/null | awk '{print $3}'; }

T0=$(up)
for m in drbg jitterentropy_rng af_alg algif_hash algif_skcipher ecb cmac ecdh_generic hci_vhci; do
	modprobe "$m" || grep -q "/$m.ko" "/lib/modules/$(uname -r)/modules.builtin" || fail "modprobe $m"
done
# hci0 and hci1 for every scenario; hci2-hci5 for "links" (three more devices' controllers and two more centrals:
# btvirt carries one link per central controller, many-links.md §4.2).
btvirt -L -l6 > /tmp/btvirt.log 2>&1 &
PIDS="$PIDS $!"
wait_for 20 test -e /sys/class/bluetooth/hci5 || { fail "btvirt did not create hci0 to hci5"; show /tmp/btvirt.log; }
for i in 0 1 2 3 4 5; do timeout 20 btmgmt --index $i power on > /dev/null || fail "btmgmt: power on hci$i"; done
CENTRAL=$(hciconfig hci0 | awk '/BD Address/ {print $3}')
note "controllers up in $(since "$T0") s: hci0 $CENTRAL (bledfu), hci1 $(hciconfig hci1 | awk '/BD Address/ {print $3}') (virtual bracelet)"

# ---------------------------------------------------------------- scenario 1: scan, buttonless jump, flash, gatttool
scenario_flash() {
	S=/tmp/flash
	mkdir -p $S
	TS=$(up)
	btmon -w "$OUT/flash.btsnoop" > /dev/null 2>&1 &
	MON=$!
	sleep 0.3
	bledfu simulate --adapter hci1 --device bracelet --state-dir $S/device --speedup 4 > $S/simulate.log 2>&1 &
	SIM=$!
	if ! wait_for 20 grep -q "$APP advertising" $S/simulate.log; then
		fail "flash: the simulator did not advertise on hci1"
		show $S/simulate.log
		stop_pid $SIM; stop_pid $MON
		return
	fi
	STEPS="simulator advertising $(since "$TS") s"
	TSCAN=$(up)
	timeout 30 bledfu scan --adapter hci0 --duration 3 > $S/scan.txt 2>&1
	STEPS="$STEPS, scan $(since "$TSCAN") s"
	if grep -q "$APP" $S/scan.txt; then
		pass "scan: bledfu on hci0 finds the virtual bracelet $APP that hci1 advertises ($(grep "$APP" $S/scan.txt | head -1 | tr -s ' '))"
	else
		fail "scan: $APP not found"; show $S/scan.txt
	fi
	TF=$(up)
	bounded 150 env BLEDFU_LOG=debug bledfu flash "$PKG" --adapter hci0 --device "$APP" --key "$KEY" --state-dir $S/journal > $S/flash.txt 2>&1
	RC=$?
	STEPS="$STEPS, flash $(since "$TF") s"
	if [ $RC = 0 ]; then
		pass "flash: bracelet-app-v2.zip flashed over the kernel's L2CAP in $(since "$TF") s ($(grep -m1 '^Done:' $S/flash.txt | tr -s ' '))"
	else
		fail "flash: exit code $RC"; show $S/flash.txt; show $S/simulate.log
	fi
	if grep -q "$BOOT advertising" $S/simulate.log && grep -q "$BOOT connected" $S/simulate.log; then
		pass "buttonless jump: the bootloader advertised at address + 1 ($BOOT) and bledfu connected to it"
	else
		fail "buttonless jump: no bootloader at $BOOT"; show $S/simulate.log
	fi
	grep -i "link:" $S/flash.txt | head -2 | sed 's/^/VMTEST: /'
	TG=$(up)
	STATUS=$(bledfu simulate status --status-dir $S/device/status 2>&1)
	STEPS="$STEPS, status $(since "$TG") s"
	if echo "$STATUS" | grep -q "app v2"; then
		pass "device reports the new image: $STATUS"
	else
		fail "device status after flash: $STATUS"
	fi
	# BlueZ's gatttool as a second, foreign client, once bledfu's link is gone.
	TG=$(up)
	wait_for 15 links_closed $S/simulate.log
	STEPS="$STEPS, links closed $(since "$TG") s"
	sleep 0.5
	TG=$(up)
	PRIMARY=$(timeout 40 gatttool -i hci0 -b "$APP" -t random --primary 2>&1)
	CHARS=$(timeout 40 gatttool -i hci0 -b "$APP" -t random --characteristics 2>&1)
	STEPS="$STEPS, gatttool $(since "$TG") s"
	echo "$PRIMARY" > $S/gatttool.txt
	echo "$CHARS" >> $S/gatttool.txt
	if echo "$PRIMARY" | grep -q "0000fe59-0000-1000-8000-00805f9b34fb" && echo "$CHARS" | grep -qi "8ec90003"; then
		pass "gatttool: $(echo "$PRIMARY" | grep -c 'uuid:') primary services (FE59 among them) and $(echo "$CHARS" | grep -c 'uuid =') characteristics (buttonless 8EC90003 among them)"
	else
		fail "gatttool did not read the GATT database"; show $S/gatttool.txt
	fi
	TG=$(up)
	stop_pid $SIM
	stop_pid $MON
	STEPS="$STEPS, stop $(since "$TG") s"
	# Link tuning, from the capture: the LE Connection Update bledfu asked for completed at 7.5 ms.
	TG=$(up)
	btmon -r "$OUT/flash.btsnoop" > $S/btmon.txt 2>&1
	STEPS="$STEPS, btmon -r $(since "$TG") s"
	if grep -A4 "LE Connection Update Complete" $S/btmon.txt | grep -q "Connection interval: 7.50 msec"; then
		pass "link tuning: LE Connection Update to 7.5 ms completed (LE Set PHY and LE Set Data Length sent $(grep -c 'HCI Command: LE Set PHY' $S/btmon.txt) and $(grep -c 'HCI Command: LE Set Data Length' $S/btmon.txt) times: btvirt answers Unknown HCI Command)"
	else
		fail "link tuning: no LE Connection Update Complete at 7.5 ms in the capture"
	fi
	for f in $S/*.log $S/*.txt; do cp "$f" "$OUT/flash-$(basename "$f")" 2>/dev/null; done
	note "scenario flash took $(since "$TS") s ($STEPS)"
}

# ---------------------------------------------------------------- scenario 2: the link is cut mid-transfer
scenario_resume() {
	S=/tmp/resume
	mkdir -p $S
	TS=$(up)
	btmon -w "$OUT/resume.btsnoop" > /dev/null 2>&1 &
	MON=$!
	sleep 0.3
	bledfu simulate --adapter hci1 --device bracelet --state-dir $S/device --save-progress > $S/simulate.log 2>&1 &
	SIM=$!
	wait_for 20 grep -q "$APP advertising" $S/simulate.log || fail "resume: the simulator did not advertise"
	timeout 180 bledfu flash "$PKG" --adapter hci0 --device "$APP" --key "$KEY" --state-dir $S/journal --json \
		> $S/flash.ndjson 2> $S/flash.err &
	FLASH=$!
	if wait_for 60 sh -c "[ \"\$(grep -o '\"data_offset\" : [0-9]*' $S/device/status/$STATUS_NAME 2>/dev/null | awk '{print \$3}')\" -ge 8192 ] 2>/dev/null"; then
		CUT=$(data_offset $S/device/status/$STATUS_NAME)
		kill -9 $SIM
		wait $SIM 2>/dev/null
		# The kernel keeps an idle LE link for seconds after its sockets closed: drop it now, as a device reset does.
		for peer in $(timeout 10 btmgmt --index 1 con 2>/dev/null | awk '/type/ {print $1}'); do
			timeout 10 btmgmt --index 1 disconnect -t 1 "$peer" > /dev/null 2>&1 ||
				timeout 10 btmgmt --index 1 disconnect -t 2 "$peer" > /dev/null 2>&1
		done
		note "resume: killed the device process (kill -9) and dropped the link at data offset $CUT"
		sleep 1
		bledfu simulate --adapter hci1 --device bracelet --state-dir $S/device --save-progress >> $S/simulate.log 2>&1 &
		SIM=$!
	else
		fail "resume: the transfer never passed 8192 bytes"
		show $S/flash.err
	fi
	wait $FLASH
	RC=$?
	RESULT=$(grep '"event":"result"' $S/flash.ndjson | tail -1)
	SUMMARY=$(grep -o '"reconnects":[0-9]*' $S/flash.ndjson | tail -1)
	if [ $RC = 0 ]; then
		pass "resume: the upload finished after the cut ($SUMMARY) in $(since "$TS") s"
	else
		fail "resume: flash exit code $RC"; show $S/flash.err; tail -5 $S/flash.ndjson; show $S/simulate.log
	fi
	SHA=$(unzip -p "$PKG" bracelet-app-v2.bin | sha256sum | cut -d' ' -f1)
	if grep -q "$SHA" $S/device/status/$STATUS_NAME && bledfu simulate status --status-dir $S/device/status | grep -q "app v2"; then
		pass "resume: the device runs the package's image (SHA-256 ${SHA%"${SHA#????????????}"}...)"
	else
		fail "resume: the device's image is not the package's ($RESULT)"; cat $S/device/status/$STATUS_NAME
	fi
	stop_pid $SIM
	stop_pid $MON
	for f in $S/simulate.log $S/flash.ndjson $S/flash.err; do cp "$f" "$OUT/resume-$(basename "$f")" 2>/dev/null; done
	note "scenario resume took $(since "$TS") s"
}

# ---------------------------------------------------------------- scenario 3: bledfu without privileges
scenario_unprivileged() {
	S=/tmp/unprivileged
	mkdir -p $S/home
	chmod 777 $S/home
	TS=$(up)
	btmon -w "$OUT/unprivileged.btsnoop" > /dev/null 2>&1 &
	MON=$!
	sleep 0.3
	bledfu simulate --adapter hci1 --device bracelet --state-dir $S/device --speedup 4 > $S/simulate.log 2>&1 &
	SIM=$!
	wait_for 20 grep -q "$APP advertising" $S/simulate.log || fail "unprivileged: the simulator did not advertise"
	# As nobody: no CAP_NET_RAW, so no link tuning and no scanning; L2CAP needs no privilege.
	timeout 150 su -s /bin/sh nobody -c "HOME=$S/home bledfu flash $PKG --adapter hci0 --device $APP --key $KEY \
		--state-dir $S/home/journal" > $S/flash.txt 2>&1
	RC=$?
	stop_pid $SIM
	stop_pid $MON
	btmon -r "$OUT/unprivileged.btsnoop" > $S/btmon.txt 2>&1
	TUNED=$(grep -c "HCI Command: LE Connection Update" $S/btmon.txt)
	if [ $RC = 0 ] && [ "$TUNED" = 0 ] && bledfu simulate status --status-dir $S/device/status | grep -q "app v2"; then
		pass "unprivileged: as nobody the flash completes without link tuning ($(grep -m1 '^Done:' $S/flash.txt | tr -s ' '))"
	else
		fail "unprivileged: exit code $RC, $TUNED LE Connection Update(s)"; show $S/flash.txt; show $S/simulate.log
	fi
	for f in $S/simulate.log $S/flash.txt; do cp "$f" "$OUT/unprivileged-$(basename "$f")" 2>/dev/null; done
	note "scenario unprivileged took $(since "$TS") s"
}

# ---------------------------------------------------------------- scenario 4: a Legacy DFU device (nRF5 SDK 11)
scenario_legacy() {
	S=/tmp/legacy
	mkdir -p $S
	TS=$(up)
	LAPP=E1:5D:11:51:00:01   # Firmware/sdk11-nrf51.json
	btmon -w "$OUT/legacy.btsnoop" > /dev/null 2>&1 &
	MON=$!
	sleep 0.3
	bledfu simulate --adapter hci1 --device sdk11-nrf51 --state-dir $S/device --speedup 4 > $S/simulate.log 2>&1 &
	SIM=$!
	if ! wait_for 20 grep -q "$LAPP advertising" $S/simulate.log; then
		fail "legacy: the simulator did not advertise on hci1"; show $S/simulate.log
		stop_pid $SIM; stop_pid $MON
		return
	fi
	TF=$(up)
	bounded 150 env BLEDFU_LOG=debug bledfu flash $FW/samples/sdk11-nrf51-app-v2.zip --adapter hci0 --device "$LAPP" --state-dir $S/journal > $S/flash.txt 2>&1
	RC=$?
	if [ $RC = 0 ] && grep -q "is a Legacy DFU device running its application" $S/flash.txt && grep -q "is a Legacy DFU device ready for the update" $S/flash.txt; then
		pass "legacy: sdk11-nrf51-app-v2.zip flashed over the kernel's L2CAP in $(since "$TF") s (detected from DFU Version 0.1, legacy buttonless jump, SDK 11 bootloader; $(grep -m1 '^Done:' $S/flash.txt | tr -s ' '))"
	else
		fail "legacy: exit code $RC"; show $S/flash.txt; show $S/simulate.log
	fi
	STATUS=$(bledfu simulate status --status-dir $S/device/status 2>&1)
	if echo "$STATUS" | grep -q "app v2"; then
		pass "legacy: the device reports the new image: $STATUS"
	else
		fail "legacy: device status after flash: $STATUS"
	fi
	stop_pid $SIM
	stop_pid $MON
	for f in $S/*.log $S/*.txt; do cp "$f" "$OUT/legacy-$(basename "$f")" 2>/dev/null; done
	note "scenario legacy took $(since "$TS") s"
}

# ---------------------------------------------------------------- scenario 5: an MCUmgr SMP device (MCUboot)
scenario_smp() {
	S=/tmp/smp
	mkdir -p $S
	TS=$(up)
	SMP_APP=E4:5A:3C:2B:1A:09  # Firmware/smp-sensor.json
	btmon -w "$OUT/smp.btsnoop" > /dev/null 2>&1 &
	MON=$!
	sleep 0.3
	bledfu simulate --adapter hci1 --device smp-sensor --state-dir $S/device --speedup 4 > $S/simulate.log 2>&1 &
	SIM=$!
	if ! wait_for 20 grep -q "$SMP_APP advertising" $S/simulate.log; then
		fail "smp: the simulator did not advertise on hci1"; show $S/simulate.log
		stop_pid $SIM; stop_pid $MON
		return
	fi
	timeout 30 bledfu scan --adapter hci0 --duration 3 > $S/scan.txt 2>&1
	if grep "$SMP_APP" $S/scan.txt | grep -q " smp "; then
		pass "smp: scan shows the SMP family of $SMP_APP"
	else
		fail "smp: scan did not show $SMP_APP as smp"; show $S/scan.txt
	fi
	TF=$(up)
	bounded 150 env BLEDFU_LOG=debug bledfu flash $FW/samples/smp-sensor-app-v2.bin --adapter hci0 --device "$SMP_APP" \
		--key $FW/keys/mcuboot-test-key-DO-NOT-USE.pub.pem --state-dir $S/journal > $S/flash.txt 2>&1
	RC=$?
	if [ $RC = 0 ] && grep -q "2.0.0, active, confirmed" $S/flash.txt; then
		pass "smp: smp-sensor-app-v2.bin uploaded, tested, reset into and confirmed over the kernel's L2CAP in $(since "$TF") s ($(grep -m1 '^Done:' $S/flash.txt | tr -s ' '))"
	else
		fail "smp: flash exit code $RC"; show $S/flash.txt; show $S/simulate.log
	fi
	wait_for 15 links_closed $S/simulate.log
	timeout 40 bledfu image list --adapter hci0 --device "$SMP_APP" > $S/image.txt 2>&1
	# Standard error (the link line) comes first in the file: look for the slot line itself.
	if grep -q "^image 0 slot 0: 2.0.0  active confirmed" $S/image.txt; then
		pass "smp: image list over hci0: $(grep -m1 '^image 0 slot 0' $S/image.txt)"
	else
		fail "smp: image list"; show $S/image.txt
	fi
	stop_pid $SIM
	stop_pid $MON
	for f in $S/simulate.log $S/flash.txt $S/image.txt $S/scan.txt; do cp "$f" "$OUT/smp-$(basename "$f")" 2>/dev/null; done
	note "scenario smp took $(since "$TS") s"
}

# ---------------------------------------------------------------- scenario 6: three devices at once, one cut
# Three bracelets on hci1-hci3, one `bledfu batch` with three central adapters (hci0, hci4, hci5: one link each, as
# btvirt carries one link per central controller, many-links.md §4.2); the second device drops its link after
# 12000 bytes and its flash resumes inside the same attempt.
scenario_links() {
	S=/tmp/links
	mkdir -p $S
	TS=$(up)
	SIMS=""
	for i in 1 2 3; do
		sed "s/C6:05:04:03:02:01/C6:05:04:03:1$i:01/; s/\"Bracelet\"/\"Bracelet$i\"/" $FW/bracelet.json > $S/bracelet$i.json
		FAULT=""
		[ $i = 2 ] && FAULT="--fault disconnect-after-bytes=12000"
		bledfu simulate --adapter hci$i --device $S/bracelet$i.json --state-dir $S/device$i --speedup 4 $FAULT \
			> $S/simulate$i.log 2>&1 &
		SIMS="$SIMS $!"
	done
	for i in 1 2 3; do
		wait_for 20 grep -q "C6:05:04:03:1$i:01 advertising" $S/simulate$i.log || { fail "links: device $i did not advertise"; show $S/simulate$i.log; }
	done
	cat > $S/plan.yaml <<PLAN
adapters:
  - name: hci0
    connections: 1
  - name: hci4
    connections: 1
  - name: hci5
    connections: 1
classes:
  bracelet:
    package: $PKG
devices:
  - {address: "C6:05:04:03:11:01", class: bracelet}
  - {address: "C6:05:04:03:12:01", class: bracelet}
  - {address: "C6:05:04:03:13:01", class: bracelet}
flash:
  keys: [$KEY]
  timeout: 20
  stall_timeout: 60
PLAN
	TF=$(up)
	# The batch's own bound first: a child silent for 60 s (stall_timeout) is killed and retried (exit 59 on its
	# attempt), well inside the scenario's 300 s; 120 s was below the default stall limit (150 s for this plan), so
	# a stuck child could only end by this timeout's kill.
	timeout 300 bledfu batch $S/plan.yaml --db $S/batch.sqlite --state-dir $S/state --json > $S/batch.ndjson 2> $S/batch.err
	RC=$?
	ADAPTERS=$(grep '"event":"started"' $S/batch.ndjson | grep -o '"adapter":"hci[0-9]"' | sort -u | wc -l)
	if [ $RC = 0 ] && [ "$ADAPTERS" = 3 ]; then
		pass "links: three bracelets flashed at once through the kernel by one bledfu batch on three central adapters in $(since "$TF") s"
	else
		fail "links: batch exit code $RC, $ADAPTERS central adapter(s) used"; show $S/batch.err; tail -5 $S/batch.ndjson
	fi
	for i in 1 2 3; do
		STATUS=$(bledfu simulate status --status-dir $S/device$i/status 2>&1)
		echo "$STATUS" | grep -q "app v2" || fail "links: device $i after the batch: $STATUS"
	done
	FIRED=$(grep -o '"faults_fired" : [0-9]*' $S/device2/status/C6-05-04-03-12-01.json 2>/dev/null | awk '{print $3}')
	if [ "${FIRED:-0}" -ge 1 ]; then
		pass "links: device 2 dropped its link mid-transfer and its update resumed (app v2 on all three)"
	else
		fail "links: device 2's cut did not fire"; cat $S/device2/status/C6-05-04-03-12-01.json 2>/dev/null | head -40
	fi
	for p in $SIMS; do stop_pid $p; done
	for f in $S/*.log $S/batch.ndjson $S/batch.err; do cp "$f" "$OUT/links-$(basename "$f")" 2>/dev/null; done
	# Each device's `bledfu flash` standard error and the batch's notes on it (a kill, its reason).
	for f in $S/state/batch-logs/*.log; do cp "$f" "$OUT/links-child-$(basename "$f")" 2>/dev/null || true; done
	note "scenario links took $(since "$TS") s"
}

# ---------------------------------------------------------------- scenario 6b: one central controller, two links
# Two bracelets on hci1 and hci2, one `bledfu batch` with ONE central adapter (hci0) and connections: 2. BlueZ's
# btvirt cannot carry a second simultaneous link from one central controller (many-links.md §4.2: the peripheral is
# told the central's handle): this shows what bledfu says then, and that the batch still ends (no hang). Measured:
# the second device's connect times out (exit 15) and so does its retry after the first link is gone (the
# peripheral controller's host keeps the dead link and stops advertising); the first device is done; batch exit 50.
scenario_onecentral() {
	S=/tmp/onecentral
	mkdir -p $S
	TS=$(up)
	SIMS=""
	for i in 1 2; do
		sed "s/C6:05:04:03:02:01/C6:05:04:03:2$i:01/; s/\"Bracelet\"/\"Bracelet$i\"/" $FW/bracelet.json > $S/bracelet$i.json
		bledfu simulate --adapter hci$i --device $S/bracelet$i.json --state-dir $S/device$i --speedup 4 > $S/simulate$i.log 2>&1 &
		SIMS="$SIMS $!"
	done
	for i in 1 2; do
		wait_for 20 grep -q "C6:05:04:03:2$i:01 advertising" $S/simulate$i.log || { fail "onecentral: device $i did not advertise"; show $S/simulate$i.log; }
	done
	cat > $S/plan.yaml <<PLAN
adapters:
  - name: hci0
    connections: 2
classes:
  bracelet:
    package: $PKG
devices:
  - {address: "C6:05:04:03:21:01", class: bracelet}
  - {address: "C6:05:04:03:22:01", class: bracelet}
policies:
  retries: 1
flash:
  keys: [$KEY]
  timeout: 10
  reconnect_attempts: 1
PLAN
	TF=$(up)
	timeout 200 bledfu batch $S/plan.yaml --db $S/batch.sqlite --state-dir $S/state --json > $S/batch.ndjson 2> $S/batch.err
	RC=$?
	bledfu batch report --db $S/batch.sqlite --format json > $S/report.json 2>&1
	SAID=$(grep -o '"error":"[^"]*"' $S/batch.ndjson | sort | uniq -c | sort -rn | head -3 | tr -s ' ' | tr '\n' ';')
	# 124: GNU timeout's status; 143: busybox timeout's (SIGTERM), the one in the VM.
	if [ $RC = 124 ] || [ $RC = 143 ]; then
		fail "onecentral: the batch hung (timeout killed it)"; show $S/batch.err
	elif [ $RC = 0 ] || [ $RC = 50 ]; then
		pass "onecentral: one central controller, two links: batch exit $RC in $(since "$TF") s; bledfu said: ${SAID:-no error}"
	else
		fail "onecentral: batch exit code $RC"; show $S/batch.err; tail -5 $S/batch.ndjson
	fi
	note "onecentral: $(grep -c '"event":"started"' $S/batch.ndjson) attempts started, $(grep -c '"retrying":true' $S/batch.ndjson) retried"
	for p in $SIMS; do stop_pid $p; done
	for f in $S/*.log $S/batch.ndjson $S/batch.err $S/report.json; do cp "$f" "$OUT/onecentral-$(basename "$f")" 2>/dev/null; done
	note "scenario onecentral took $(since "$TS") s"
}

# ---------------------------------------------------------------- scenario 7: bluetoothd running beside bledfu
# bluetoothd 5.66 with its default configuration (no main.conf) on a D-Bus system bus, started before the device
# and the flash: the README says bledfu and bluetoothd coexist. The simulator on hci1 is started after bluetoothd, so
# its ATT listener is the most recent one and gets the incoming link (many-links.md §5.1).
scenario_bluetoothd() {
	S=/tmp/bluetoothd
	mkdir -p $S /run/dbus /var/lib/bluetooth
	TS=$(up)
	command -v bluetoothd > /dev/null || { fail "bluetoothd: not in the image (the host has no bluetoothd or dbus-daemon)"; return; }
	cat > $S/dbus.conf <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path=/run/dbus/system_bus_socket</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/></policy>
</busconfig>
CONF
	dbus-daemon --config-file=$S/dbus.conf --fork --print-pid > $S/dbus.pid 2> $S/dbus.err || { fail "bluetoothd: dbus-daemon did not start"; show $S/dbus.err; return; }
	bluetoothd -n -d > $S/bluetoothd.log 2>&1 &
	BTD=$!
	if ! wait_for 15 grep -q "Adapter /org/bluez/hci1 has been enabled\|adapter_service_add\|hci1" $S/bluetoothd.log; then
		fail "bluetoothd: did not take the adapters"; show $S/bluetoothd.log
	fi
	sleep 1
	kill -0 $BTD 2>/dev/null && note "bluetoothd: running (pid $BTD), $(grep -c 'hci[0-9]' $S/bluetoothd.log) log lines about the adapters"
	bledfu simulate --adapter hci1 --device bracelet --state-dir $S/device --speedup 4 > $S/simulate.log 2>&1 &
	SIM=$!
	wait_for 20 grep -q "$APP advertising" $S/simulate.log || { fail "bluetoothd: the simulator did not advertise beside bluetoothd"; show $S/simulate.log; }
	TF=$(up)
	# The HCI traffic of the flash (bluetoothd's commands on hci0 included) and its steps, for a failure's reading.
	btmon -w "$OUT/bluetoothd.btsnoop" > /dev/null 2>&1 &
	MON=$!
	bounded 150 env BLEDFU_LOG=debug bledfu flash "$PKG" --adapter hci0 --device "$APP" --key "$KEY" --state-dir $S/journal -v > $S/flash.txt 2>&1
	RC=$?
	stop_pid $MON
	if [ $RC = 0 ] && bledfu simulate status --status-dir $S/device/status | grep -q "app v2"; then
		pass "bluetoothd: with bluetoothd running (default configuration) bledfu flashed the bracelet through hci0 in $(since "$TF") s"
	else
		fail "bluetoothd: with bluetoothd running, bledfu flash exit code $RC: $(grep 'bledfu: error' $S/flash.txt | head -1)"
		show $S/flash.txt; show $S/bluetoothd.log 30
	fi
	stop_pid $SIM
	stop_pid $BTD
	kill "$(cat $S/dbus.pid)" 2>/dev/null
	for f in $S/simulate.log $S/flash.txt $S/bluetoothd.log; do cp "$f" "$OUT/bluetoothd-$(basename "$f")" 2>/dev/null; done
	note "scenario bluetoothd took $(since "$TS") s"
}

case "${VMTEST_ONLY:-all}" in
flash) scenario_flash ;;
resume) scenario_resume ;;
unprivileged) scenario_unprivileged ;;
legacy) scenario_legacy ;;
smp) scenario_smp ;;
links) scenario_links ;;
onecentral) scenario_onecentral ;;
bluetoothd) scenario_bluetoothd ;;
*) scenario_flash; scenario_resume; scenario_unprivileged; scenario_legacy; scenario_smp; scenario_links; scenario_onecentral; scenario_bluetoothd ;;
esac

for p in $PIDS; do kill "$p" 2>/dev/null; done
if [ $FAILED = 0 ]; then
	note "scenarios took $(since "$T0") s"
	echo "VMTEST RESULT: PASS"
else
	echo "---- dmesg (bluetooth) ----"; dmesg | grep -i -E 'bluetooth|hci|vhci' | tail -20
	echo "VMTEST RESULT: FAIL"
fi
