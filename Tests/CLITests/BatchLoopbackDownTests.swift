import Foundation
import Testing

/// The batch that waited forever (docs/reliability.md): in a network namespace whose loopback interface is down (as
/// in the test VM before its init brought `lo` up), Foundation's `Process` could not create the CFSocket wake-up pair
/// it watches children with ("Could not create wakeup socket pair for CFSocket"): the three `bledfu flash` children
/// finished, their exits went unnoticed and `bledfu batch` hung. Before the fix this test ended at its `timeout`
/// (exit 124) with every device flashed; the batch now spawns and reaps its children itself (LinuxIO's ChildProcess).
@Suite("Batch with the loopback interface down", .serialized, .timeLimit(.minutes(6)))
struct BatchLoopbackDownTests {
    @Test("Three devices flashed by one bledfu batch inside unshare -rn (lo down): the batch ends, all done")
    func batchEndsWithLoopbackDown() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let firmware = CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path
        // Simulator and batch in the same namespace: the virtual radio's abstract socket names are per namespace.
        let script = """
            set -u
            B='\(CLIRunner.binary.path)'; D='\(directory.path)'; R="$D/radio"; mkdir -p "$R"
            export BLEDFU_FIRMWARE_DIR='\(firmware)'
            ip link show lo | grep -q 'state DOWN' && echo "lo is down" > "$D/lo"
            "$B" simulate --adapter "virtual:$R" --device bracelet:3 --speedup 8 > "$D/sim.log" 2>&1 &
            SIM=$!
            n=0; while [ "$(ls "$R" | grep -c '\\.adv$')" -lt 3 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done
            cat > "$D/plan.yaml" <<PLAN
            adapters:
              - name: virtual:$R
                connections: 3
            classes:
              bracelet:
                package: $BLEDFU_FIRMWARE_DIR/samples/bracelet-app-v2.zip
            discover:
              duration: 30
              expect: 3
              rules:
                - class: bracelet
                  name_prefix: Bracelet
            flash:
              keys: [$BLEDFU_FIRMWARE_DIR/keys/test-signing-key-DO-NOT-USE.pub.pem]
              reboot_delay: 0.1
            PLAN
            timeout 200 "$B" batch "$D/plan.yaml" --db "$D/batch.sqlite" --state-dir "$D/state" --json > "$D/batch.out" 2> "$D/batch.err"
            RC=$?
            kill -INT $SIM; wait $SIM
            exit $RC
            """
        let result = try await CLIRunner.run(["-rn", "/bin/sh", "-c", script], timeout: 300, executable: URL(fileURLWithPath: "/usr/bin/unshare"))
        let errors = (try? String(contentsOf: directory.appendingPathComponent("batch.err"), encoding: .utf8)) ?? ""
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("lo").path), "lo was not down: \(result.stderr)")
        #expect(result.status == 0, "batch exit \(result.status) (124: it hung until timeout killed it): \(errors)")
        #expect(!errors.contains("CFSocket"), "\(errors)")
        let output = (try? String(contentsOf: directory.appendingPathComponent("batch.out"), encoding: .utf8)) ?? ""
        let resultLine = try #require(output.split(separator: "\n").last { $0.contains("\"event\":\"result\"") }, "no result event")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(resultLine.utf8)) as? [String: Any])
        #expect(object["done"] as? Int == 3, "\(object)")
    }
}
