"""How DistributedOptimizer returns the same optimizer with its own methods: a subclass made at run time."""


def wrap_optimizer(optimizer, methods_class):
    """optimizer as an instance of a subclass of its class holding methods_class's methods (as Horovod
    does: isinstance checks, LR schedulers and state_dict() keep working). The same state, parameter
    groups and defaults: a view of the wrapped optimizer, not a copy."""
    methods = {key: value for key, value in methods_class.__dict__.items()
               if key not in ("__dict__", "__weakref__", "__module__", "__qualname__")}
    methods["__module__"] = __package__  # shown as chorus.torch.hvd.<optimizer>, not a private module
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), methods)
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    return wrapped
