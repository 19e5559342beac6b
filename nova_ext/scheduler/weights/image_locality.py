"""ImageLocalityWeigher: prefer hosts already running the requested image.

A compute downloads an image once into its image cache (``_base``) and boots
later instances of it from there, so a host already running the image boots
without a download. Driven by ``[nova_ext] image_locality_weight_multiplier``
(aggregate metadata ``nova_ext:image_locality_weight_multiplier`` overrides
it); weight 1 for hosts running an instance of the image, 0 otherwise.
Servers booted from volume have no image to cache and get 0 everywhere.

The images of a host's instances are worked out once per change of the
host's instance list, not once per request, so the weigher stays O(1) per
host.
"""

from nova_ext.scheduler import weights

# (host, node) -> (instances-dict id, instances count, frozenset of images)
_images_by_host = {}


def images_on_host(host_state):
    instances = host_state.instances
    key = (host_state.host, host_state.nodename)
    cached = _images_by_host.get(key)
    if cached and cached[0] == id(instances) and cached[1] == len(instances):
        return cached[2]
    # Instances the scheduler placed within this request are stubs with
    # only a uuid: they are not running an image yet.
    images = frozenset(
        instance.image_ref for instance in list(instances.values())
        if instance.obj_attr_is_set('image_ref') and instance.image_ref)
    _images_by_host[key] = (id(instances), len(instances), images)
    return images


class ImageLocalityWeigher(weights.PerRequestWeigher):

    multiplier_option = 'image_locality_weight_multiplier'

    def prepare(self, spec_obj, host_states):
        if 'is_bfv' in spec_obj and spec_obj.is_bfv:
            return None
        image = spec_obj.image if 'image' in spec_obj else None
        if image is None or 'id' not in image:
            return None
        return image.id

    def weigh(self, host_state, image_id):
        if image_id is None:
            return 0.0
        return 1.0 if image_id in images_on_host(host_state) else 0.0
