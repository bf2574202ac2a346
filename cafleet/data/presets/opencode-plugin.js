// cafleet @CAFLEET_VERSION@: installed by `cafleet setup`, which replaces this file on every run.
// Reports a cafleet member's opencode session to cafleet (docs/runtime.md §4.12): each event
// runs `cafleet hook EVENT --member-id M PAYLOAD`, detached, its errors ignored, so opencode
// never waits on it. It does nothing outside a member's pane (`CAFLEET_HOOK_MEMBER=<id>`).
import { spawn } from "node:child_process";

const MAX_TEXT = 65536; // characters of a prompt passed on

export const CafleetHooks = async () => {
  const member = process.env.CAFLEET_HOOK_MEMBER || "";
  if (!/^[1-9][0-9]*$/.test(member)) return {};
  const children = new Set(); // subagents' sessions: their idle is not the member's
  const report = (event, payload) => {
    try {
      const args = ["hook", event, "--member-id", member, JSON.stringify(payload)];
      const child = spawn("cafleet", args, { detached: true, stdio: "ignore" });
      child.on("error", () => {});
      child.unref();
    } catch {
      // never fail opencode
    }
  };
  return {
    "chat.message": async (input, output) => {
      if (children.has(input?.sessionID)) return;
      const parts = (output?.parts || [])
        .filter((p) => p && p.type === "text" && typeof p.text === "string")
        .map((p) => p.text.slice(0, MAX_TEXT));
      report("prompt", { session_id: input?.sessionID, parts });
    },
    "tool.execute.before": async (input) => {
      if (children.has(input?.sessionID)) return;
      report("tool", { tool_name: String(input?.tool || "") });
    },
    event: async ({ event }) => {
      const props = event?.properties || {};
      const info = props.info || {};
      if (event?.type === "session.created" && info.parentID) children.add(info.id);
      if (children.has(props.sessionID)) return;
      if (event?.type === "session.idle") report("idle", { type: "session.idle" });
      else if (event?.type === "permission.asked")
        report("permission", { title: `${props.permission || "permission"} ${(props.patterns || []).join(" ")}`.trim() });
      else if (event?.type === "permission.replied") report("tool", { type: "permission.replied" });
    },
  };
};
