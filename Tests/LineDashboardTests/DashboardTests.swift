import Batch
import Foundation
import Testing

@testable import LineDashboard

/// The dashboard's pieces without a browser (the browser test is in CLITests: LineDashboardBrowserTests).
@Suite(.timeLimit(.minutes(5))) struct DashboardTests {
    /// The page's script puts values in the DOM only as text: no innerHTML, outerHTML, insertAdjacentHTML,
    /// document.write or eval; the page has no inline script (the CSP forbids one).
    @Test func thePageNeverTurnsDataIntoMarkup() {
        for forbidden in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
            #expect(!DashboardPage.script.contains(forbidden), "\(forbidden)")
        }
        #expect(DashboardPage.script.contains("textContent"))
        #expect(DashboardPage.html.components(separatedBy: "<script").count == 2, "one script element")
        #expect(DashboardPage.html.contains(#"<script src="/app.js" defer></script>"#))
        let policy = LineDashboard.contentSecurityPolicy
        #expect(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"))
    }

    /// The JSON the page reads carries a hostile name as data (JSON-escaped), and the database's name as given
    /// (the CLI hands over the URL without its password).
    @Test func theSnapshotJSONCarriesStringsAsData() async throws {
        var snapshot = LineSnapshot(batch: "line", generatedAt: "2026-11-24T00:00:00.000Z")
        snapshot.inFlight = [
            try JSONDecoder().decode(
                LineSnapshot.InFlight.self,
                from: Data(
                    #"{"address":"C6:05:04:03:00:01","name":"<script>alert(1)</script>","className":"bracelet","station":"s1","adapter":"hci0","stage":"uploading","bytes":1,"total":2,"percent":50,"attempt":1}"#
                        .utf8))
        ]
        let frozen = snapshot
        let dashboard = LineDashboard(database: "postgres://line@db:5432/line") { frozen }
        let json = try await dashboard.pageJSON()
        let page = try JSONDecoder().decode(LineDashboard.Page.self, from: Data(json.utf8))
        #expect(page.snapshot == snapshot)
        #expect(page.database == "postgres://line@db:5432/line")
        #expect(!json.contains("</script>"), "a slash in JSON is escaped: \(json)")
    }
}
