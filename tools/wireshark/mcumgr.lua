-- MCUmgr SMP over BLE for Wireshark / tshark (smp-mcuboot.md §1, §5): a post-dissector over the ATT layer.
--
--   tshark -X lua_script:tools/wireshark/mcumgr.lua -r capture.btsnoop -Y mcumgr \
--          -T fields -e mcumgr.op -e mcumgr.group -e mcumgr.id -e mcumgr.seq -e mcumgr.len
--
-- Requests are Write Commands (0x52) on the SMP characteristic, answers Handle Value Notifications (0x1B); a
-- packet longer than ATT_MTU - 3 spans several of them, and only the first carries the 8-byte header
-- (op:3 with the version in bits 3-4 of byte 0, flags, len (big-endian), group (big-endian), seq, id). Every
-- Write Command and notification is taken as SMP (an SMP capture has no others); the header's length says how
-- many of the following ones of the same direction continue the packet.

local mcumgr = Proto("mcumgr", "MCUmgr SMP")

local ops = { [0] = "read", [1] = "read response", [2] = "write", [3] = "write response" }
local groups = { [0] = "os", [1] = "image", [2] = "stat", [3] = "settings", [4] = "log", [5] = "crash",
                 [8] = "fs", [9] = "shell", [63] = "zephyr" }

local f_op = ProtoField.uint8("mcumgr.op", "Operation", base.DEC, ops)
local f_version = ProtoField.uint8("mcumgr.version", "Version")
local f_flags = ProtoField.uint8("mcumgr.flags", "Flags", base.HEX)
local f_len = ProtoField.uint16("mcumgr.len", "Body length")
local f_group = ProtoField.uint16("mcumgr.group", "Group", base.DEC, groups)
local f_seq = ProtoField.uint8("mcumgr.seq", "Sequence")
local f_id = ProtoField.uint8("mcumgr.id", "Command")
local f_body = ProtoField.bytes("mcumgr.body", "CBOR body (first fragment)")
local f_continuation = ProtoField.uint16("mcumgr.continuation", "Continuation bytes")
mcumgr.fields = { f_op, f_version, f_flags, f_len, f_group, f_seq, f_id, f_body, f_continuation }

local att_opcode = Field.new("btatt.opcode")
local att_value = Field.new("btatt.value")

-- Bytes still expected per direction (0x52 host to device, 0x1B device to host), and each frame's role, decided
-- on the first visit.
local remaining = {}
local roles = {}

function mcumgr.init()
    remaining = { [0x52] = 0, [0x1B] = 0 }
    roles = {}
end

function mcumgr.dissector(tvb, pinfo, tree)
    local opcode_field = att_opcode()
    local value_field = att_value()
    if opcode_field == nil or value_field == nil then return end
    local opcode = opcode_field.value
    if opcode ~= 0x52 and opcode ~= 0x1B then return end
    local range = value_field.range
    local size = range:len()
    local role = roles[pinfo.number]
    if role == nil then
        if remaining[opcode] > 0 then
            role = "continuation"
            remaining[opcode] = math.max(remaining[opcode] - size, 0)
        elseif size >= 8 then
            role = "header"
            remaining[opcode] = math.max(range(2, 2):uint() + 8 - size, 0)
        else
            return
        end
        roles[pinfo.number] = role
    end
    local subtree = tree:add(mcumgr, range)
    if role == "continuation" then
        subtree:add(f_continuation, range, size)
        pinfo.cols.info:append(" [MCUmgr continuation]")
        return
    end
    local first = range(0, 1):uint()
    local op = bit32.band(first, 0x07)
    subtree:add(f_op, range(0, 1), op)
    subtree:add(f_version, range(0, 1), bit32.rshift(bit32.band(first, 0x18), 3))
    subtree:add(f_flags, range(1, 1))
    subtree:add(f_len, range(2, 2))
    local group = range(4, 2):uint()
    subtree:add(f_group, range(4, 2))
    subtree:add(f_seq, range(6, 1))
    subtree:add(f_id, range(7, 1))
    if size > 8 then subtree:add(f_body, range(8, size - 8)) end
    pinfo.cols.protocol:set("MCUmgr")
    pinfo.cols.info:append(string.format(" [MCUmgr %s %s/%d seq %d]", ops[op] or tostring(op),
        groups[group] or tostring(group), range(7, 1):uint(), range(6, 1):uint()))
end

register_postdissector(mcumgr)
