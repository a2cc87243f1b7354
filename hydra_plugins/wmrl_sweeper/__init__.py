"""The launcher's Hydra sweeper plugin (discovered by Hydra in the ``hydra_plugins``
namespace; selected by ``conf/hydra/sweeper/launcher.yaml``)."""
