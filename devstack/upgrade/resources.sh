#!/bin/bash
# nova-ext's grenade resources (grenade's PLUGINS.rst: create, verify
# pre-upgrade|post-upgrade, verify_noapi, destroy). What must come through
# an upgrade of Nova and nova-ext:
#
# * a flavor with nova_ext: extra specs (spread at the rack level, at most
#   one member per rack, quota class nova-ext-grenade), accepted by the old
#   nova-api's validators and still by the new one's;
# * a spread group with one member per rack: each compute host gets a rack
#   aggregate (nova_ext:failure_domain:rack), and the group has as many
#   members as there are racks. Their racks must not change; after the
#   upgrade one more member is refused (the constraint still holds), and a
#   member deleted and created again lands in the rack it freed;
# * per-flavor quota limits for the flavor's class, with usage (the
#   members): nova-ext's rows read straight from the API database and the
#   usage nova-ext-manage reports must be identical before, during (no API)
#   and after;
# * a host in maintenance (nova-ext-manage host maintenance on): with two
#   or more computes the last one, after the members were placed; with one
#   compute a stand-in resource provider, so that the only host still
#   takes servers (grenade's own smoke tests need it). It must still be
#   listed after the upgrade, and no new member may land on it.

set -o errexit

source "$GRENADE_DIR/grenaderc"
source "$GRENADE_DIR/functions"

source "$TOP_DIR/openrc" admin admin

set -o xtrace

NOVA_EXT_PROJECT=nova_ext_grenade
NOVA_EXT_USER=nova_ext_grenade
NOVA_EXT_PASS=pass
NOVA_EXT_FLAVOR=nova-ext-grenade
NOVA_EXT_QUOTA_CLASS=nova-ext-grenade
NOVA_EXT_GROUP=nova-ext-grenade-spread
NOVA_EXT_STANDBY=nova-ext-grenade-standby
NOVA_EXT_RACK_PREFIX=nova-ext-grenade-rack
DEFAULT_IMAGE_NAME=${DEFAULT_IMAGE_NAME:-cirros-0.3.2-x86_64-uec}
NOVA_CONF=${NOVA_CONF:-/etc/nova/nova.conf}

function _nova_ext_manage {
    local bin_dir=${NOVA_BIN_DIR:-$(dirname "$(command -v nova-manage)")}
    "$bin_dir/nova-ext-manage" --config-file "$NOVA_CONF" "$@"
}

function _nova_ext_set_user {
    export OS_TENANT_NAME=$NOVA_EXT_PROJECT
    export OS_PROJECT_NAME=$NOVA_EXT_PROJECT
    export OS_USERNAME=$NOVA_EXT_USER
    export OS_PASSWORD=$NOVA_EXT_PASS
}

# nova-ext's limit rows, straight from Nova's API database (no API needed:
# verify_noapi reads them too), one line per row, sorted.
function _nova_ext_quota_rows {
    local user password host
    user=$(set +o xtrace && source "$TOP_DIR/stackrc" && echo "${DATABASE_USER:-root}")
    password=$(set +o xtrace && source "$TOP_DIR/stackrc" && echo "$DATABASE_PASSWORD")
    host=$(set +o xtrace && source "$TOP_DIR/stackrc" && echo "${DATABASE_HOST:-127.0.0.1}")
    mysql -u"$user" -p"$password" -h"$host" -Bse \
        "SELECT id, project_id, scope, name, resource, hard_limit FROM nova_api.nova_ext_flavor_quotas ORDER BY id"
}

function _nova_ext_usage {
    _nova_ext_manage quota usage --project "$(resource_get nova-ext project_id)" --class "$NOVA_EXT_QUOTA_CLASS"
}

# "<member id> <host>" for each member of the group, sorted by id.
function _nova_ext_members {
    local group member
    group=$(resource_get nova-ext group_id)
    for member in $(openstack server group show "$group" -f value -c members | tr -d "[]',"); do
        echo "$member $(openstack server show "$member" -f value -c OS-EXT-SRV-ATTR:host)"
    done | sort
}

function _nova_ext_rack_of {
    resource_get nova-ext "rack_$1"
}

# Creates a member of the group as the project's user and prints its id
# once it is ACTIVE or ERROR (the caller judges which it should be).
function _nova_ext_create_member {
    local name=$1
    local net_id id status nic=()
    net_id=$(resource_get network net_id)
    if [[ -n "$net_id" ]]; then
        nic=(--nic "net-id=$net_id")
    fi
    _nova_ext_set_user
    id=$(openstack server create --image "$DEFAULT_IMAGE_NAME" --flavor "$NOVA_EXT_FLAVOR" \
        --hint "group=$(resource_get nova-ext group_id)" "${nic[@]}" "$name" -f value -c id)
    for _attempt in $(seq 1 "${INSTANCE_WAIT:-60}"); do
        status=$(openstack server show "$id" -f value -c status)
        [[ "$status" == ACTIVE || "$status" == ERROR ]] && break
        sleep 1
    done
    source_quiet "$TOP_DIR/openrc" admin admin
    echo "$id"
}

function create {
    eval "$(openstack project create -f shell -c id $NOVA_EXT_PROJECT)"
    [[ -n "$id" ]] || die $LINENO "Didn't create $NOVA_EXT_PROJECT project"
    resource_save nova-ext project_id "$id"
    local project_id=$id
    eval "$(openstack user create $NOVA_EXT_USER --project "$project_id" \
        --domain default --password $NOVA_EXT_PASS -f shell -c id)"
    [[ -n "$id" ]] || die $LINENO "Didn't create $NOVA_EXT_USER user"
    resource_save nova-ext user_id "$id"
    openstack role add member --user "$id" --project "$project_id"

    # one rack per compute host
    local hosts host rack index=0
    hosts=$(openstack compute service list --service nova-compute -f value -c Host | sort)
    for host in $hosts; do
        index=$((index + 1))
        rack=r$index
        openstack aggregate create "$NOVA_EXT_RACK_PREFIX-$rack"
        openstack aggregate set --property "nova_ext:failure_domain:rack=$rack" "$NOVA_EXT_RACK_PREFIX-$rack"
        openstack aggregate add host "$NOVA_EXT_RACK_PREFIX-$rack" "$host"
        resource_save nova-ext "rack_$host" "$rack"
    done
    resource_save nova-ext racks "$index"

    openstack flavor create --ram 128 --disk 1 --vcpus 1 \
        --property nova_ext:spread_level=rack \
        --property nova_ext:spread_max_per_domain=1 \
        --property "nova_ext:quota_class=$NOVA_EXT_QUOTA_CLASS" "$NOVA_EXT_FLAVOR"
    openstack flavor show "$NOVA_EXT_FLAVOR" -f value -c properties > "$SAVE_DIR/nova-ext-flavor.txt"

    # limits: room for one member per rack and one more, which the spread
    # (not the quota) must refuse
    _nova_ext_manage quota set --project "$project_id" --class "$NOVA_EXT_QUOTA_CLASS" \
        --instances $((index + 1)) --cores $((index + 1)) --ram $((128 * (index + 1)))
    _nova_ext_manage quota set --project '*' --class "$NOVA_EXT_QUOTA_CLASS" --instances 0

    _nova_ext_set_user
    eval "$(openstack server group create --policy anti-affinity $NOVA_EXT_GROUP -f shell -c id)"
    resource_save nova-ext group_id "$id"
    source_quiet "$TOP_DIR/openrc" admin admin
    local member
    for member in $(seq 1 "$index"); do
        id=$(_nova_ext_create_member "nova-ext-grenade-$member")
        [[ "$(openstack server show "$id" -f value -c status)" == ACTIVE ]] \
            || die $LINENO "member $member of the spread group is not ACTIVE"
    done

    local hosts_used
    hosts_used=$(_nova_ext_members | awk '{print $2}' | sort -u | wc -l)
    [[ "$hosts_used" == "$index" ]] || die $LINENO "expected $index members on $index racks, got: $(_nova_ext_members)"
    _nova_ext_members > "$SAVE_DIR/nova-ext-members.txt"

    # the host in maintenance
    local standby
    if [[ $index -ge 2 ]]; then
        standby=$(echo "$hosts" | tail -1)
    else
        standby=$NOVA_EXT_STANDBY
        openstack resource provider create "$standby"
    fi
    _nova_ext_manage host maintenance on "$standby"
    resource_save nova-ext maintenance "$standby"

    _nova_ext_quota_rows > "$SAVE_DIR/nova-ext-quota-rows.txt"
    [[ -s "$SAVE_DIR/nova-ext-quota-rows.txt" ]] || die $LINENO "no nova-ext quota rows"
    _nova_ext_usage > "$SAVE_DIR/nova-ext-usage.txt"
    worlddump nova_ext_resources_created
}

function verify_noapi {
    _nova_ext_quota_rows > "$SAVE_DIR/nova-ext-quota-rows.now"
    diff -u "$SAVE_DIR/nova-ext-quota-rows.txt" "$SAVE_DIR/nova-ext-quota-rows.now" \
        || die $LINENO "nova-ext's quota rows changed"
}

function verify {
    local side=$1
    verify_noapi

    _nova_ext_usage > "$SAVE_DIR/nova-ext-usage.now"
    diff -u "$SAVE_DIR/nova-ext-usage.txt" "$SAVE_DIR/nova-ext-usage.now" \
        || die $LINENO "nova-ext's quota usage changed"
    openstack flavor show "$NOVA_EXT_FLAVOR" -f value -c properties > "$SAVE_DIR/nova-ext-flavor.now"
    diff -u "$SAVE_DIR/nova-ext-flavor.txt" "$SAVE_DIR/nova-ext-flavor.now" \
        || die $LINENO "the nova_ext: extra specs changed"
    _nova_ext_members > "$SAVE_DIR/nova-ext-members.now"
    diff -u "$SAVE_DIR/nova-ext-members.txt" "$SAVE_DIR/nova-ext-members.now" \
        || die $LINENO "the spread group's members moved"
    local standby
    standby=$(resource_get nova-ext maintenance)
    _nova_ext_manage host maintenance list | grep -qx "$standby" \
        || die $LINENO "$standby is no longer in maintenance"

    if [[ "$side" == "post-upgrade" ]]; then
        verify_new_members
    fi
}

# The new code still enforces what the old one promised: one more member
# is refused (every rack holds one), and a member deleted and created again
# lands in the rack it freed -- never on the host in maintenance. The
# group ends as it was (same racks, same usage), so verify can run again.
function verify_new_members {
    local extra status
    extra=$(_nova_ext_create_member nova-ext-grenade-extra)
    status=$(openstack server show "$extra" -f value -c status)
    [[ "$status" == "ERROR" ]] || die $LINENO "a member beyond one per rack was placed ($status)"
    openstack server delete --wait "$extra"

    local first host rack again again_host
    read -r first host <<< "$(head -1 "$SAVE_DIR/nova-ext-members.txt")"
    rack=$(_nova_ext_rack_of "$host")
    openstack server delete --wait "$first"
    again=$(_nova_ext_create_member "nova-ext-grenade-again")
    [[ "$(openstack server show "$again" -f value -c status)" == ACTIVE ]] \
        || die $LINENO "the member replacing $first is not ACTIVE"
    again_host=$(openstack server show "$again" -f value -c OS-EXT-SRV-ATTR:host)
    [[ "$(_nova_ext_rack_of "$again_host")" == "$rack" ]] \
        || die $LINENO "the new member went to $again_host, not to rack $rack it freed"
    [[ "$again_host" != "$(resource_get nova-ext maintenance)" ]] \
        || die $LINENO "the new member went to the host in maintenance"
    _nova_ext_members > "$SAVE_DIR/nova-ext-members.txt"
    _nova_ext_usage > "$SAVE_DIR/nova-ext-usage.now"
    diff -u "$SAVE_DIR/nova-ext-usage.txt" "$SAVE_DIR/nova-ext-usage.now" \
        || die $LINENO "nova-ext's quota usage differs after replacing a member"
}

function destroy {
    local member
    for member in $(_nova_ext_members | awk '{print $1}'); do
        openstack server delete --wait "$member"
    done
    openstack server group delete "$(resource_get nova-ext group_id)"
    local standby
    standby=$(resource_get nova-ext maintenance)
    _nova_ext_manage host maintenance off "$standby"
    if [[ "$standby" == "$NOVA_EXT_STANDBY" ]]; then
        openstack resource provider delete "$(openstack resource provider list --name "$standby" -f value -c uuid)"
    fi
    local project_id
    project_id=$(resource_get nova-ext project_id)
    _nova_ext_manage quota delete --project "$project_id" --class "$NOVA_EXT_QUOTA_CLASS"
    _nova_ext_manage quota delete --project '*' --class "$NOVA_EXT_QUOTA_CLASS"
    openstack flavor delete "$NOVA_EXT_FLAVOR"
    local rack aggregate
    for rack in $(seq 1 "$(resource_get nova-ext racks)"); do
        aggregate=$NOVA_EXT_RACK_PREFIX-r$rack
        for host in $(openstack aggregate show "$aggregate" -f value -c hosts | tr -d "[]',"); do
            openstack aggregate remove host "$aggregate" "$host"
        done
        openstack aggregate delete "$aggregate"
    done
    openstack user delete "$(resource_get nova-ext user_id)"
    openstack project delete "$project_id"
}

# Dispatcher
case $1 in
    "create")
        create
        ;;
    "verify_noapi")
        verify_noapi "$2"
        ;;
    "verify")
        verify "$2"
        ;;
    "destroy")
        destroy
        ;;
    "force_destroy")
        set +o errexit
        destroy
        ;;
esac
